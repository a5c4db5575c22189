package kafka

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/xorack/xorack/topology"
)

// runSink runs topic "in" (n records) through a Kafka spout into sink and
// returns the failures the engine gave up on, once every record is done.
func runSink(t *testing.T, c *cluster, sink *Sink, n int) []topology.Failure {
	t.Helper()
	sp, err := New(Config{Brokers: c.k.Addrs(), Topics: []string{"in"}, Group: "g", Logger: quietLogger(), CommitInterval: 10 * time.Millisecond,
		Opts: fastGroup})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		fails []topology.Failure
	)
	cfg := topology.DefaultConfig()
	cfg.Retry = topology.RetryPolicy{MaxAttempts: 1}
	cfg.DeadLetter = func(d topology.DeadLetter) {
		mu.Lock()
		fails = append(fails, d.Failure)
		mu.Unlock()
	}
	b := topology.NewBuilder()
	b.Spout("records", func() topology.Spout { return sp }).Output(RecordField)
	b.Bolt("out", sink.Bolt).Executors(2).Input("records", topology.Shuffle())
	top, err := b.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := top.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every record done", func() bool {
		st := sp.Stats()
		return st.Completed+st.DeadLettered == uint64(n)
	})
	c.waitCaughtUp(t, "g", "in")
	ctx, cancel := contextWithTimeout()
	defer cancel()
	if err := top.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return fails
}

func recordValue(tu *topology.Tuple) ([]byte, error) { return tu.Value(0).(*kgo.Record).Value, nil }
func recordKey(tu *topology.Tuple) []byte {
	return []byte("k-" + string(tu.Value(0).(*kgo.Record).Value))
}

// The sink acks each input once the broker has its record: every input
// record is in the output topic, keyed by the user's function, and the
// spout committed every input to its end.
func TestSinkAcksWhenTheBrokerHasTheRecord(t *testing.T) {
	const n = 300
	c := startCluster(t, 1, "in", "out")
	c.produce(t, "in", 1, n)
	sink, err := NewSink(SinkConfig{Brokers: c.k.Addrs(), Topic: "out", Key: recordKey, Value: recordValue, MaxInFlightBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if fails := runSink(t, c, sink, n); len(fails) != 0 {
		t.Fatalf("%d inputs failed: %v", len(fails), fails[0].Err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	out := readTopic(t, c, "out")
	seen := map[string]bool{}
	for _, r := range out {
		if string(r.Key) != "k-"+string(r.Value) {
			t.Fatalf("record %q keyed %q", r.Value, r.Key)
		}
		seen[string(r.Value)] = true
	}
	for i := range n {
		if !seen[sentence(0, i)] {
			t.Fatalf("input %d (%q) not in the output", i, sentence(0, i))
		}
	}
	if st := sink.Stats(); st.Produced != n || st.Failed != 0 || len(out) != n {
		t.Fatalf("stats %+v, %d output records, want %d", st, len(out), n)
	}
}

// A produce the broker refuses (here: a topic that does not exist, the
// client told not to wait for it) fails its input with a *ProduceError
// carrying the broker's error.
func TestSinkFailsWithTheBrokersError(t *testing.T) {
	const n = 5
	c := startCluster(t, 1, "in")
	c.produce(t, "in", 1, n)
	sink, err := NewSink(SinkConfig{Brokers: c.k.Addrs(), Topic: "missing", Value: recordValue,
		Opts: []kgo.Opt{kgo.UnknownTopicRetries(0)}})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	fails := runSink(t, c, sink, n)
	if len(fails) != n {
		t.Fatalf("%d inputs failed, want %d", len(fails), n)
	}
	for _, f := range fails {
		var pe *ProduceError
		if !errors.As(f.Err, &pe) || pe.Topic != "missing" || !errors.Is(pe.Err, kerr.UnknownTopicOrPartition) {
			t.Fatalf("failure %v: want a *ProduceError for topic \"missing\"", f.Err)
		}
	}
	if st := sink.Stats(); st.Failed != n || st.Produced != 0 {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("failure: %v", fails[0].Err)
}

func contextWithTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), testTimeout)
}
