package bench

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/bench/internal/pipeline"
	"github.com/xorack/xorack/netio"
)

// The net level: the pipeline's producers and spouts in one process, the
// acker behind loopback TCP connections, one per producer. "netio" is
// package netio's client and server (cmd/ackerd's), "grpc" the same acker
// behind gRPC bidirectional streams carrying the same 24-byte records in
// the same batches, and "inproc" the same acker in process (the
// pipeline's xorack, no network): the same run's measure of what the
// network adds. Each producer is one connection (Config.Conns says how
// many), replays its share of the stream, and is the spout task its
// roots report to; the rows then come from the pipeline's runner
// (pipeRow), so throughput, latency and verification are measured the
// same way.
//
// Batches: every impl gets the same calls. A producer hands over
// Config.NetBatch messages at a time, SendBatch then Flush, as a spout
// executor hands over what it emitted (the latency run: 64 at a time,
// latencyQuantum). netio's client stages them as one frame and its
// writer writes whatever frames are queued with one write; the gRPC
// client sends each batch as one stream message (what a Go user would
// write); in process, each batch is one publish into the shard's ring.
// The servers put the same acker behind both transports (one shard by
// default, acker's default ring and batch, netio's default idle), apply
// each batch as it is read and stream the outcomes back as they come.

// maxNetFrameMsgs bounds a gRPC message the server sends: 2,048 outcome
// records are 48 KiB, under gRPC's 4 MiB default message limit.
const maxNetFrameMsgs = 2048

// maxNetBatch bounds Config.NetBatch: 4,096 records are a 96 KiB gRPC
// message or netio frame.
const maxNetBatch = 4096

// netSecret authenticates the benchmark's connections.
var netSecret = []byte("ackbench-net-level-secret")

type netImpl struct {
	name string
	make func(pipeline.Config) (pipeline.Pipe, error)
}

var netImpls = []netImpl{
	{name: "netio", make: newNetioPipe},
	{name: "grpc", make: newGRPCPipe},
	{name: "inproc", make: newInprocPipe},
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

// DefaultNetBatch are the producer batch sizes the net level runs by
// default: 16, a latency-minded spout flushing often, and 256, the
// pipeline's span.
var DefaultNetBatch = []int{16, 256}

// net runs the net level for one stream: for each connection count and
// batch size, each impl, the impls alternating.
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
		for _, batch := range c.NetBatch {
			sub := *rn
			cfg := *c
			cfg.Producers, cfg.Batch, cfg.netSend = conns, batch, true
			sub.cfg = &cfg
			for _, name := range names {
				impl, _ := findNet(name)
				rn.progress(rn.rowCost(p), "net %s P=%d conns=%d batch=%d: %s", st.Shape.Name, p, conns, batch, name)
				row, err := sub.pipeRow(pipeImpl{name: impl.name, make: impl.make}, st, shares, p, timeout)
				row.Level, row.Conns, row.Producers, row.Batch = LevelNet, conns, conns, batch
				row.Shards = c.Shards
				if err != nil {
					return rows, err
				}
				rows = append(rows, row)
			}
		}
	}
	return rows, nil
}

// newInprocPipe is the pipeline's xorack: the net level's acker with no
// network between it and the producers. Its shards drain their rings in
// the acker's default batch, as the servers' do: the producers' batch is
// how much they hand over at a time, not how much a shard takes (with
// Batch 1 a shard would apply one message a pass).
func newInprocPipe(pc pipeline.Config) (pipeline.Pipe, error) {
	pc.Batch = 0
	return pipeline.NewXorack(pc)
}

// netioPipe: a netio.Server on a loopback port, one netio client per
// producer (one connection each, task p).
type netioPipe struct {
	srv     *netio.Server
	clients []*netio.Client
	pc      pipeline.Config
	addr    string
	served  chan error
}

func newNetioPipe(pc pipeline.Config) (pipeline.Pipe, error) {
	srv, err := netio.NewServer(netio.ServerConfig{
		Secret: netSecret, Shards: pc.Shards, Tasks: pc.Producers, MaxConns: pc.Producers,
		Shard: ackcore.Config{MaxPending: pc.MaxPending, Timeout: pc.Timeout, Clock: pc.Clock},
		// Neither bound may bind before the acker's own: the stream keeps
		// about P roots pending, and more are in flight on the wire.
		MaxConnPending: 4 * pc.MaxPending * pc.Shards,
		// No flood here, and the fair shares must not bind: a connection's
		// held count runs ahead of its entries by the outcomes on their way
		// to the router, which on a loaded machine passed the default
		// slack (TestNetLevel had INITs refused in CI's parallel run).
		ShareSlack: 1 << 30,
	})
	if err != nil {
		return nil, err
	}
	return &netioPipe{srv: srv, pc: pc, served: make(chan error, 1)}, nil
}

func (np *netioPipe) Start() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		np.srv.Close()
		return err
	}
	np.addr = ln.Addr().String()
	go func() { np.served <- np.srv.Serve(ln) }()
	for p := 0; p < np.pc.Producers; p++ {
		c, err := netio.Dial(netio.ClientConfig{
			Hosts: []string{np.addr}, Secret: netSecret, TaskBase: uint32(p),
			MaxPending: 4 * np.pc.MaxPending * np.pc.Shards,
		}, acker.Spec{Producers: 1, Tasks: 1})
		if err != nil {
			np.Stop()
			return err
		}
		np.clients = append(np.clients, c)
	}
	return nil
}

// Sender is producer p's connection. Its client owns one spout task,
// the server's task p, which the client knows as its task 0.
func (np *netioPipe) Sender(p int) acker.Sender { return np.clients[p].Sender(0) }

// SpoutTask is the task producer p's INITs name: its client's task 0.
func (np *netioPipe) SpoutTask(int) uint32 { return 0 }

// Inbox is producer p's connection's only inbox.
func (np *netioPipe) Inbox(p int) acker.Inbox { return np.clients[p].Inbox(0) }

func (np *netioPipe) Stats() ackcore.Stats { return np.srv.Stats().Acker }

func (np *netioPipe) Placement() ([]int, string) { return nil, "" }

func (np *netioPipe) Stop() ackcore.Stats {
	for _, c := range np.clients {
		c.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = np.srv.Shutdown(ctx)
	<-np.served
	return np.srv.Stats().Acker
}

// netSummary says, per connection count and batch size of a net run,
// netio's msgs/s over gRPC's and the CPU each spends per message beside
// the acker's in process (process CPU over the peak runs), so that the
// network path's cost stands beside a baseline it cannot move.
func netSummary(rows []Row) []string {
	type key struct{ conns, batch, p int }
	type group struct{ msgs, cpu map[string]float64 }
	var keys []key
	groups := map[key]*group{}
	for _, r := range rows {
		if r.Level != LevelNet || r.FaultStats != nil || r.FailRate > 0 || r.DropRate > 0 {
			continue
		}
		k := key{r.Conns, r.Batch, r.Pending}
		g := groups[k]
		if g == nil {
			g = &group{msgs: map[string]float64{}, cpu: map[string]float64{}}
			groups[k] = g
			keys = append(keys, k)
		}
		g.msgs[r.Impl] = r.MsgsPerSec
		if x := r.CountersPerMsg["task-clock-ns"]; x != nil {
			g.cpu[r.Impl] = *x
		}
	}
	var out []string
	for _, k := range keys {
		g := groups[k]
		n, gr, in := g.cpu["netio"], g.cpu["grpc"], g.cpu["inproc"]
		if g.msgs["netio"] <= 0 || g.msgs["grpc"] <= 0 || n <= 0 || gr <= 0 || in <= 0 {
			continue
		}
		out = append(out, fmt.Sprintf("net P=%d conns=%d batch=%d: netio/gRPC %.2fx msgs/s; cpu-ns/msg netio %.1f, gRPC %.1f, in process %.1f (netio %.2fx in process)",
			k.p, k.conns, k.batch, g.msgs["netio"]/g.msgs["grpc"], n, gr, in, n/in))
	}
	return out
}
