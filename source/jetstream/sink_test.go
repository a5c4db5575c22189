package jetstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/xorack/xorack/topology"
)

func posData(t *topology.Tuple) ([]byte, error) { return t.Value(1).([]byte), nil }
func posID(t *topology.Tuple) string            { return t.Value(0).(Position).String() }

// The sink publishes each input with its source position as Nats-Msg-Id
// and acks it on the PubAck. A bolt beside it fails a fifth of the trees'
// first attempts after the sink has written them: the engine replays those
// messages, the sink publishes them again, and the stream's duplicate
// window makes the replays write nothing. The output stream holds each
// input exactly once.
func TestSinkReplayWritesNothing(t *testing.T) {
	const n = 200
	e, _ := newStream(t, n, time.Second, 0)
	out, err := e.js.CreateStream(ctx(t), natsjs.StreamConfig{Name: "OUT", Subjects: []string{"out.>"}, Duplicates: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	subject := func(tu *topology.Tuple) string { return fmt.Sprintf("out.%d", tu.Value(0).(Position).Seq) }
	c := ctx(t)
	sink, err := NewSink(SinkConfig{JetStream: e.js, Subject: subject, Data: posData, MsgID: posID})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testTopology()
	cfg.Retry = topology.RetryPolicy{MaxAttempts: 5, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Jitter: -1}
	p := start(t, cfg, Config{JetStream: e.js, Stream: "S", Consumer: "c", FetchWait: 20 * time.Millisecond}, 1, func(b *topology.Builder) {
		b.Bolt("out", sink.Bolt).Input("js", topology.Shuffle())
		b.Bolt("flaky", func() topology.Bolt {
			return topology.Basic(topology.BasicFunc(func(tu *topology.Tuple, _ *topology.BasicCollector) error {
				if tu.Value(0).(Position).Seq%5 != 0 || tu.Attempt() != 1 {
					return nil
				}
				// Fail only once the output stream holds the sink's write
				// of this input: then its replay is a duplicate for sure
				// (failing earlier, the sink may see the replay first).
				for deadline := time.Now().Add(testTimeout); ; {
					if _, err := out.GetLastMsgForSubject(c, subject(tu)); err == nil {
						return errors.New("first attempt lost")
					}
					if time.Now().After(deadline) {
						return fmt.Errorf("the sink never wrote %s", posID(tu))
					}
					time.Sleep(time.Millisecond) // polls the stream
				}
			}))
		}).Input("js", topology.Shuffle())
	})
	waitFor(t, "every message acked", func() bool { return p.stats().Acked == n }, func() string { return "" })
	p.stop(t)
	info, err := e.js.Stream(ctx(t), "OUT")
	if err != nil {
		t.Fatal(err)
	}
	st := sink.Stats()
	if msgs := info.CachedInfo().State.Msgs; msgs != n || st.Published != n || st.Duplicates < n/5 || st.Failed != 0 {
		t.Fatalf("output stream holds %d messages (want %d); sink %+v (want %d published, at least %d duplicates)", msgs, n, st, n, n/5)
	}
}

// A publish the server refuses (no stream takes the subject) fails its
// input with a *PublishError carrying the server's error.
func TestSinkFailsWithTheServersError(t *testing.T) {
	const n = 3
	e, _ := newStream(t, n, time.Second, 0)
	sink, err := NewSink(SinkConfig{JetStream: e.js, Subject: func(*topology.Tuple) string { return "nowhere" }, Data: posData, MsgID: posID,
		PublishTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fails := sinkFailures(t, e, sink, n)
	for _, err := range fails {
		var pe *PublishError
		if !errors.As(err, &pe) || pe.Subject != "nowhere" || !errors.Is(pe.Err, natsjs.ErrNoStreamResponse) {
			t.Fatalf("failure %v: want a *PublishError with no stream response", err)
		}
	}
	t.Logf("failure: %v", fails[0])
}

// sinkFailures runs stream S's n messages, one attempt each, into sink,
// and returns the errors of their n dead letters, the pipeline stopped.
func sinkFailures(t *testing.T, e *env, sink *Sink, n int) []error {
	t.Helper()
	cfg := testTopology()
	cfg.Retry = topology.RetryPolicy{MaxAttempts: 1}
	dead := make(chan DeadLetter, n)
	p := start(t, cfg, Config{JetStream: e.js, Stream: "S", Consumer: "c", FetchWait: 20 * time.Millisecond,
		DeadLetter: func(d DeadLetter) { dead <- d }}, 1, func(b *topology.Builder) {
		b.Bolt("out", sink.Bolt).Input("js", topology.Shuffle())
	})
	var fails []error
	for range n {
		select {
		case d := <-dead:
			fails = append(fails, d.Err)
		case <-time.After(testTimeout):
			t.Fatal("timed out waiting for the dead letters")
		}
	}
	p.stop(t)
	return fails
}

// gatedJetStream is the sink's JetStream with PublishMsg counted and,
// until the gate opens, held before it reaches the server: the bytes
// (subject and data) of the publishes called and not yet returned with a
// PubAck are the sink's in flight, measured outside it.
type gatedJetStream struct {
	natsjs.JetStream
	gate chan struct{}

	mu          sync.Mutex
	bytes, peak int64
	calls       int
	acked       map[string]bool // data the stream acknowledged
}

func (g *gatedJetStream) PublishMsg(ctx context.Context, m *nats.Msg, opts ...natsjs.PublishOpt) (*natsjs.PubAck, error) {
	n := int64(len(m.Subject) + len(m.Data))
	g.mu.Lock()
	g.bytes += n
	g.calls++
	g.peak = max(g.peak, g.bytes)
	g.mu.Unlock()
	<-g.gate
	ack, err := g.JetStream.PublishMsg(ctx, m, opts...)
	g.mu.Lock()
	g.bytes -= n
	g.calls--
	if err == nil {
		g.acked[string(m.Data)] = true
	}
	g.mu.Unlock()
	return ack, err
}

func (g *gatedJetStream) state() (bytes, peak int64, calls int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.bytes, g.peak, g.calls
}

// The sink's in-flight bytes stay within MaxInFlightBytes while many
// messages go through 16 executors, each of which could hold a publish:
// the bound admits 4. First every publish is held before the server (the
// gate): 4 are in flight, the other 12 executors wait in Execute rather
// than publish, and no input is acked, none of its messages having a
// PubAck. Then the gate opens and every message goes through, the peak
// still at most the bound; every input is acked at the server and every
// message is in the output stream.
func TestSinkBoundsInFlightBytes(t *testing.T) {
	const subject, dataBytes, fit, executors = "out.x", 1000, 4, 16
	const msgBytes = len(subject) + dataBytes
	const bound = fit*msgBytes + msgBytes/2
	n := size(1000, 300)
	e, _ := newStream(t, n, time.Second, 0)
	if _, err := e.js.CreateStream(ctx(t), natsjs.StreamConfig{Name: "OUT", Subjects: []string{"out.>"}, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	g := &gatedJetStream{JetStream: e.js, gate: make(chan struct{}), acked: map[string]bool{}}
	var opened sync.Once
	open := func() { opened.Do(func() { close(g.gate) }) }
	var data atomic.Int64
	sink, err := NewSink(SinkConfig{JetStream: g, Subject: func(*topology.Tuple) string { return subject }, MsgID: posID,
		MaxInFlightBytes: bound, PublishTimeout: testTimeout,
		Data: func(tu *topology.Tuple) ([]byte, error) {
			data.Add(1)
			v := fmt.Appendf(nil, "in@%d ", tu.Value(0).(Position).Seq)
			return append(v, bytes.Repeat([]byte("."), dataBytes-len(v))...), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	// Retries: on a slow run (-race) the server may deliver to a pull the
	// client has given up on, and redeliver after AckWait; the Nats-Msg-Id
	// makes a second publish write nothing.
	cfg := testTopology()
	p := start(t, cfg, Config{JetStream: e.js, Stream: "S", Consumer: "c", FetchWait: 20 * time.Millisecond}, 1, func(b *topology.Builder) {
		b.Bolt("out", sink.Bolt).Executors(executors).Input("js", topology.Shuffle())
	})
	defer open() // before the pipeline's stop, on a failure

	waitFor(t, "every executor publishing, the bound's worth in flight", func() bool {
		held, _, calls := g.state()
		if held > int64(bound) {
			t.Fatalf("gate shut: %d publishes, %d bytes in flight, over MaxInFlightBytes %d", calls, held, bound)
		}
		return data.Load() == executors && calls == fit
	}, func() string { return fmt.Sprintf("%d executors in Execute", data.Load()) })
	if st := p.stats(); st.Acked != 0 || sink.Stats().Published != 0 {
		t.Fatalf("with no PubAck: spout %d acked, sink %+v", st.Acked, sink.Stats())
	}
	held, _, _ := g.state()
	t.Logf("gate shut: %d executors in Execute, %d bytes in flight (bound %d), the rest waiting", data.Load(), held, bound)
	open()
	e.waitSettled("S", "c", uint64(n)) // every input acked at the server
	p.stop(t)
	_, peak, _ := g.state()
	if peak > int64(bound) {
		t.Fatalf("%d bytes in flight at the peak, over MaxInFlightBytes %d", peak, bound)
	}
	if peak < int64(fit*msgBytes) {
		t.Fatalf("peak %d bytes in flight: the bound (%d) was never pressed", peak, bound)
	}
	info, err := e.js.Stream(ctx(t), "OUT")
	if err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	acked := len(g.acked)
	g.mu.Unlock()
	st := sink.Stats()
	if msgs := info.CachedInfo().State.Msgs; msgs != uint64(n) || st.Published != uint64(n) || st.Failed != 0 || acked != n || p.stats().DeadLettered != 0 {
		t.Fatalf("output stream holds %d messages, %d PubAcked; sink %+v; spout %+v; want %d, none dead-lettered", msgs, acked, st, p.stats(), n)
	}
	t.Logf("%d messages of %d bytes through %d executors: peak %d bytes in flight, bound %d", n, msgBytes, executors, peak, bound)
}

// A message larger than MaxInFlightBytes fails its input, nothing
// published; a negative bound is refused.
func TestSinkRefusesAMessageOverTheBound(t *testing.T) {
	const n = 3
	if _, err := NewSink(SinkConfig{JetStream: nil}); err == nil {
		t.Fatal("NewSink without JetStream: no error")
	}
	e, _ := newStream(t, n, time.Second, 0)
	if _, err := NewSink(SinkConfig{JetStream: e.js, Subject: func(*topology.Tuple) string { return "out.x" }, Data: posData, MsgID: posID,
		MaxInFlightBytes: -1}); err == nil || !strings.Contains(err.Error(), "MaxInFlightBytes -1") {
		t.Fatalf("NewSink with MaxInFlightBytes -1: %v", err)
	}
	g := &gatedJetStream{JetStream: e.js, gate: make(chan struct{}), acked: map[string]bool{}}
	close(g.gate)
	sink, err := NewSink(SinkConfig{JetStream: g, Subject: func(*topology.Tuple) string { return "out.x" }, Data: posData, MsgID: posID,
		MaxInFlightBytes: 8})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range sinkFailures(t, e, sink, n) {
		var pe *PublishError
		if !errors.As(err, &pe) || !strings.Contains(pe.Error(), "over SinkConfig.MaxInFlightBytes 8") {
			t.Fatalf("failure %v: want a *PublishError naming the bound", err)
		}
	}
	if _, peak, _ := g.state(); peak != 0 || sink.Stats().Failed != n {
		t.Fatalf("%d bytes published, sink %+v; want none published, %d failed", peak, sink.Stats(), n)
	}
}

// The sink's byte budget: takes that fit go at once, the rest wait first
// come first served; a waiter whose context ends gets its error, gives
// nothing away and lets the ones behind it go.
func TestBudgetWaitsInOrderAndTimesOut(t *testing.T) {
	b := &budget{free: 10}
	bg := context.Background()
	if err := b.take(bg, 8); err != nil {
		t.Fatal(err)
	}
	big, bigCancel := context.WithCancel(bg)
	bigDone := make(chan error, 1)
	go func() { bigDone <- b.take(big, 8) }() // waits: 2 free
	waitFor(t, "the big take waiting", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.waiters) == 1
	}, func() string { return "" })
	smallDone := make(chan error, 1)
	go func() { smallDone <- b.take(bg, 1) }() // fits, but waits behind the big one
	waitFor(t, "the small take waiting behind it", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.waiters) == 2
	}, func() string { return "" })
	select {
	case err := <-smallDone:
		t.Fatalf("the small take went ahead of the big one: %v", err)
	default:
	}
	bigCancel()
	if err := <-bigDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled take: %v, want context.Canceled", err)
	}
	if err := <-smallDone; err != nil {
		t.Fatalf("the small take after the big one gave up: %v", err)
	}
	b.give(1)
	b.give(8)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.free != 10 || len(b.waiters) != 0 {
		t.Fatalf("budget after every byte given back: %d free, %d waiters; want 10, 0", b.free, len(b.waiters))
	}
}
