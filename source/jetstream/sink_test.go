package jetstream

import (
	"errors"
	"testing"
	"time"

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
	if _, err := e.js.CreateStream(ctx(t), natsjs.StreamConfig{Name: "OUT", Subjects: []string{"out.>"}, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	sink, err := NewSink(SinkConfig{JetStream: e.js, Subject: func(*topology.Tuple) string { return "out.x" }, Data: posData, MsgID: posID})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testTopology()
	cfg.Retry = topology.RetryPolicy{MaxAttempts: 5, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Jitter: -1}
	p := start(t, cfg, Config{JetStream: e.js, Stream: "S", Consumer: "c", FetchWait: 20 * time.Millisecond}, 1, func(b *topology.Builder) {
		b.Bolt("out", sink.Bolt).Input("js", topology.Shuffle())
		b.Bolt("flaky", func() topology.Bolt {
			return topology.Basic(topology.BasicFunc(func(tu *topology.Tuple, _ *topology.BasicCollector) error {
				if tu.Value(0).(Position).Seq%5 == 0 && tu.Attempt() == 1 {
					return errors.New("first attempt lost")
				}
				return nil
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
	cfg := testTopology()
	cfg.Retry = topology.RetryPolicy{MaxAttempts: 1}
	var fails []error
	dead := make(chan DeadLetter, n)
	p := start(t, cfg, Config{JetStream: e.js, Stream: "S", Consumer: "c", FetchWait: 20 * time.Millisecond,
		DeadLetter: func(d DeadLetter) { dead <- d }}, 1, func(b *topology.Builder) {
		b.Bolt("out", sink.Bolt).Input("js", topology.Shuffle())
	})
	for range n {
		select {
		case d := <-dead:
			fails = append(fails, d.Err)
		case <-time.After(testTimeout):
			t.Fatal("timed out waiting for the dead letters")
		}
	}
	p.stop(t)
	for _, err := range fails {
		var pe *PublishError
		if !errors.As(err, &pe) || pe.Subject != "nowhere" || !errors.Is(pe.Err, natsjs.ErrNoStreamResponse) {
			t.Fatalf("failure %v: want a *PublishError with no stream response", err)
		}
	}
	t.Logf("failure: %v", fails[0])
}
