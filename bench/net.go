package bench

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/netio"
)

// The net level: the pipeline's producers and spouts in one process, the
// acker behind loopback TCP connections, one per producer. "netio" is
// package netio's client and server (cmd/ackerd's), "grpc" the same acker
// behind gRPC bidirectional streams carrying the same 24-byte records in
// the same batch sizes. Each producer is one connection (Config.Conns
// says how many), replays its share of the stream, and is the spout task
// its roots report to; the rows then come from the pipeline's runner
// (pipeRow), so throughput, latency and verification are measured the
// same way.

// Frames: a producer's messages go out in frames (netio) or gRPC messages
// of Config.Batch messages (default 256, the pipeline's span), whichever
// the impl; the latency run flushes every latencyQuantum messages, so both
// then carry frames of that size. maxNetFrameMsgs bounds a gRPC message
// the server sends: 2,048 outcome records are 48 KiB, under gRPC's 4 MiB
// default message limit and netio's 1 MiB frame limit.
const maxNetFrameMsgs = 2048

// netSecret authenticates the benchmark's connections.
var netSecret = []byte("ackbench-net-level-secret")

type netImpl struct {
	name string
	make func(pipeConfig) (pipe, error)
}

var netImpls = []netImpl{
	{name: "netio", make: newNetioPipe},
	{name: "grpc", make: newGRPCPipe},
}

func findNet(name string) (netImpl, bool) {
	for _, i := range netImpls {
		if i.name == name {
			return i, true
		}
	}
	return netImpl{}, false
}

// DefaultConns are the connection counts the net level runs by default.
var DefaultConns = []int{1, 4}

// net runs the net level for one stream: for each connection count, each
// impl, the impls alternating.
func (rn *runner) net(st *stream, p int) ([]Row, error) {
	c := rn.cfg
	names := c.impls[LevelNet]
	if len(names) == 0 {
		return nil, nil
	}
	timeout := rn.timeout(st)
	var rows []Row
	for _, conns := range c.Conns {
		if p < conns {
			return rows, fmt.Errorf("bench: pending window %d is smaller than conns %d", p, conns)
		}
		shares := st.shares(conns)
		sub := *rn
		cfg := *c
		cfg.Producers = conns
		sub.cfg = &cfg
		for _, name := range names {
			impl, _ := findNet(name)
			rn.progress("net %s P=%d conns=%d: %s", st.Shape.Name, p, conns, name)
			row, err := sub.pipeRow(pipeImpl{name: impl.name, make: impl.make}, st, shares, p, timeout)
			row.Level, row.Conns, row.Producers = LevelNet, conns, conns
			row.Shards = c.Shards
			if err != nil {
				return rows, err
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// netioPipe: a netio.Server on a loopback port, one netio client per
// producer (one connection each, task p).
type netioPipe struct {
	srv     *netio.Server
	clients []*netio.Client
	pc      pipeConfig
	addr    string
	served  chan error
}

func newNetioPipe(pc pipeConfig) (pipe, error) {
	srv, err := netio.NewServer(netio.ServerConfig{
		Secret: netSecret, Shards: pc.shards, Pin: pc.pin, Tasks: pc.producers, MaxConns: pc.producers,
		Shard: ackcore.Config{MaxPending: pc.maxPending, Timeout: pc.timeout, Clock: pc.clock},
		// Neither bound may bind before the acker's own: the stream keeps
		// about P roots pending, and more are in flight on the wire.
		MaxConnPending: 4 * pc.maxPending * pc.shards,
	})
	if err != nil {
		return nil, err
	}
	return &netioPipe{srv: srv, pc: pc, served: make(chan error, 1)}, nil
}

func (np *netioPipe) start() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		np.srv.Close()
		return err
	}
	np.addr = ln.Addr().String()
	go func() { np.served <- np.srv.Serve(ln) }()
	for p := 0; p < np.pc.producers; p++ {
		c, err := netio.Dial(netio.ClientConfig{
			Hosts: []string{np.addr}, Secret: netSecret, TaskBase: uint32(p), FrameMsgs: min(np.pc.batch, netio.MaxMsgsPerFrame(netio.DefaultMaxFrame)),
			MaxPending: 4 * np.pc.maxPending * np.pc.shards,
		}, acker.Spec{Producers: 1, Tasks: 1})
		if err != nil {
			np.stop()
			return err
		}
		np.clients = append(np.clients, c)
	}
	return nil
}

func (np *netioPipe) sender(p int) sender {
	c := np.clients[p]
	return netioSender{portSender{c.Producer(0), c.Receiver(0)}, uint32(p)}
}

// netioSender maps the producer's task p (the harness names producer p's
// roots task p) to its client's only task, 0, which the server knows as
// TaskBase p.
type netioSender struct {
	portSender
	task uint32
}

func (s netioSender) send(m ackcore.Msg) error {
	if m.Kind == ackcore.Init {
		m.Task -= s.task
	}
	return s.s.Send(m)
}

func (np *netioPipe) stats() ackcore.Stats { return np.srv.Stats().Acker }

func (np *netioPipe) stop() ackcore.Stats {
	for _, c := range np.clients {
		c.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = np.srv.Shutdown(ctx)
	<-np.served
	return np.srv.Stats().Acker
}

// portSender is a sender over an acker.Port's handles.
type portSender struct {
	s acker.Sender
	i acker.Inbox
}

func (s portSender) send(m ackcore.Msg) error                     { return s.s.Send(m) }
func (s portSender) flush() error                                 { return s.s.Flush() }
func (s portSender) poll(dst []ackcore.Outcome) []ackcore.Outcome { return s.i.Poll(dst) }

// netInbox is a mutex-guarded outcome queue, filled by a connection's
// reading goroutine and polled by its producer (the grpc client side).
type netInbox struct {
	mu sync.Mutex
	q  []ackcore.Outcome
}

func (ib *netInbox) put(outs []ackcore.Outcome) {
	ib.mu.Lock()
	ib.q = append(ib.q, outs...)
	ib.mu.Unlock()
}

func (ib *netInbox) poll(dst []ackcore.Outcome) []ackcore.Outcome {
	ib.mu.Lock()
	dst = append(dst, ib.q...)
	ib.q = ib.q[:0]
	ib.mu.Unlock()
	return dst
}
