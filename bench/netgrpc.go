package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/bench/internal/pipeline"
	"github.com/xorack/xorack/internal/outq"
	"github.com/xorack/xorack/netio"
)

// The grpc baseline: what a Go user would reach for. One gRPC
// bidirectional stream per connection (its own ClientConn, so its own
// TCP connection); client to server, each gRPC message is one producer
// batch (one SendBatch) of 24-byte message records (netio's records,
// netrecords.go, carried as bytes by a codec that passes them through: no
// protobuf, no generated code, so the baseline pays only for gRPC's
// framing, HTTP/2 and flow control); server to client, batches of
// 24-byte outcome records as the acker hands them over. The server side
// feeds an acker configured as netio's server configures its own (shards,
// ring, batch, idle), its producer p being stream p, applying each
// message's batch as it is read; each stream's sender goroutine waits on
// the acker receiver of its task directly (no routing hop: a shortcut
// netio's server cannot take, since it learns tasks from the handshake).

// rawCodec passes []byte messages through.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("bench: grpc raw codec cannot marshal %T", v)
	}
	return *b, nil
}

// Unmarshal keeps data itself, no copy: gRPC hands a codec of this kind
// a buffer of its own per message, and the caller decodes it before its
// next receive.
func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("bench: grpc raw codec cannot unmarshal into %T", v)
	}
	*b = data
	return nil
}

func (rawCodec) Name() string { return "xorack-raw" }

var grpcStreamDesc = grpc.StreamDesc{StreamName: "Stream", ServerStreams: true, ClientStreams: true}

type grpcPipe struct {
	ak     *acker.Acker
	srv    *grpc.Server
	pc     pipeline.Config
	addr   string
	conns  []*grpc.ClientConn
	sends  []*grpcSender
	served chan error
	wg     sync.WaitGroup // client readers
}

func newGRPCPipe(pc pipeline.Config) (pipeline.Pipe, error) {
	// netio.NewServer's acker: its shards, default ring and batch, and
	// idle; one receiver per stream here, one router there.
	idle := netio.DefaultIdle()
	ak, err := acker.New(acker.Config{
		Shards: pc.Shards, Spec: acker.Spec{Producers: pc.Producers, Tasks: pc.Producers}, Shard: ackcore.Config{MaxPending: pc.MaxPending, Timeout: pc.Timeout, Clock: pc.Clock},
		Idle: &idle,
	})
	if err != nil {
		return nil, err
	}
	return &grpcPipe{ak: ak, pc: pc, served: make(chan error, 1)}, nil
}

func (gp *grpcPipe) Start() error {
	if err := gp.ak.Start(); err != nil {
		return err
	}
	gp.srv = grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
	desc := grpc.ServiceDesc{ServiceName: "xorack.Acker", HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{grpcStreamDesc}}
	desc.Streams[0].Handler = func(_ any, ss grpc.ServerStream) error { return gp.serve(ss) }
	gp.srv.RegisterService(&desc, struct{}{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	gp.addr = ln.Addr().String()
	go func() { gp.served <- gp.srv.Serve(ln) }()
	for p := 0; p < gp.pc.Producers; p++ {
		cc, err := grpc.NewClient("passthrough:///"+gp.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
		if err != nil {
			return err
		}
		gp.conns = append(gp.conns, cc)
		st, err := cc.NewStream(context.Background(), &grpcStreamDesc, "/xorack.Acker/Stream")
		if err != nil {
			return err
		}
		hello := binary.LittleEndian.AppendUint32(nil, uint32(p))
		if err := st.SendMsg(&hello); err != nil {
			return err
		}
		s := &grpcSender{st: st, batch: gp.pc.Batch, in: outq.New[ackcore.Outcome](0)}
		gp.sends = append(gp.sends, s)
		gp.wg.Add(1)
		go func() {
			defer gp.wg.Done()
			s.read()
		}()
	}
	return nil
}

// serve is one stream on the server: the first message names the
// producer (and task); then batches of messages in, outcomes out.
func (gp *grpcPipe) serve(ss grpc.ServerStream) error {
	var b []byte
	if err := ss.RecvMsg(&b); err != nil {
		return err
	}
	if len(b) != 4 {
		return errors.New("bench: grpc stream without its producer id")
	}
	p := int(binary.LittleEndian.Uint32(b))
	if p >= gp.pc.Producers {
		return fmt.Errorf("bench: grpc producer %d out of range", p)
	}
	sendDone := make(chan error, 1)
	go func() {
		// Outcomes of task p, as they come, one gRPC message per batch.
		r := gp.ak.Inbox(gp.ak.ReceiverOf(p))
		var outs []ackcore.Outcome
		for {
			var ok bool
			outs, ok = r.Wait(outs[:0])
			if !ok {
				sendDone <- nil
				return
			}
			for len(outs) > 0 {
				n := min(len(outs), maxNetFrameMsgs)
				// A fresh buffer per message: gRPC may hold it until it
				// is written.
				buf := appendOutcomeRecords(make([]byte, 0, n*recordSize), outs[:n])
				if err := ss.SendMsg(&buf); err != nil {
					sendDone <- err
					return
				}
				outs = outs[n:]
			}
		}
	}()
	prod := gp.ak.Sender(p)
	var msgs []ackcore.Msg
	for {
		if err := ss.RecvMsg(&b); err != nil {
			_ = prod.Flush()
			if err == io.EOF {
				return <-sendDone
			}
			return err
		}
		var err error
		if msgs, err = decodeMsgRecords(msgs[:0], b); err != nil {
			return err
		}
		if err := prod.SendBatch(msgs); err != nil {
			return err
		}
		if err := prod.Flush(); err != nil {
			return err
		}
	}
}

func (gp *grpcPipe) Sender(p int) acker.Sender { return gp.sends[p] }

func (gp *grpcPipe) Inbox(p int) acker.Inbox { return gp.sends[p].in }

func (gp *grpcPipe) Stats() ackcore.Stats { return gp.ak.Stats() }

func (gp *grpcPipe) Placement() ([]int, string) { return nil, "" }

func (gp *grpcPipe) Stop() ackcore.Stats {
	for _, s := range gp.sends {
		_ = s.st.CloseSend()
	}
	st := gp.ak.Stop() // ends each stream's sender, and so the stream
	gp.wg.Wait()
	for _, cc := range gp.conns {
		cc.Close()
	}
	gp.srv.Stop()
	<-gp.served
	return st
}

// grpcSender sends each SendBatch as one gRPC message (messages given
// to Send are staged, batch records at most to a message, and sent at
// Flush), and polls the outcomes its reader goroutine received.
type grpcSender struct {
	st    grpc.ClientStream
	batch int
	msgs  []ackcore.Msg
	in    *outq.Queue[ackcore.Outcome]
}

func (s *grpcSender) Send(m ackcore.Msg) error {
	s.msgs = append(s.msgs, m)
	if len(s.msgs) >= s.batch {
		return s.Flush()
	}
	return nil
}

func (s *grpcSender) SendBatch(msgs []ackcore.Msg) error {
	if err := s.Flush(); err != nil {
		return err
	}
	return s.send(msgs)
}

// TrySend is Send: gRPC's flow control blocks inside SendMsg.
func (s *grpcSender) TrySend(m ackcore.Msg) (bool, error) { return true, s.Send(m) }

func (s *grpcSender) Flush() error {
	if len(s.msgs) == 0 {
		return nil
	}
	err := s.send(s.msgs)
	s.msgs = s.msgs[:0]
	return err
}

// send sends msgs as one gRPC message.
func (s *grpcSender) send(msgs []ackcore.Msg) error {
	if len(msgs) == 0 {
		return nil
	}
	// A fresh buffer per message: gRPC may hold it until it is written.
	b := appendMsgRecords(make([]byte, 0, len(msgs)*recordSize), msgs)
	return s.st.SendMsg(&b)
}

// read takes outcome batches off the stream until it ends.
func (s *grpcSender) read() {
	defer s.in.Close()
	var b []byte
	var outs []ackcore.Outcome
	for {
		if err := s.st.RecvMsg(&b); err != nil {
			return
		}
		var err error
		if outs, err = decodeOutcomeRecords(outs[:0], b); err != nil {
			return
		}
		s.in.Put(outs, false)
	}
}
