package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/xorack/xorack/internal/testkit"
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
	cfg := topology.Config{}
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
	c := startFilled(t, "in", 1, n)
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

// inFlightMeter counts the bytes of records the sink's client holds
// (admitted into its buffer, HookProduceRecordPartitioned, and not yet
// finished, HookProduceRecordUnbuffered) and their peak: the bytes
// produced and not yet acknowledged, as the client itself moves them.
type inFlightMeter struct {
	mu          sync.Mutex
	held        map[*kgo.Record]int64
	finished    map[*kgo.Record]bool
	bytes, peak int64
	records     int
	acked       map[string]bool // values the broker acknowledged
}

func newInFlightMeter() *inFlightMeter {
	return &inFlightMeter{held: map[*kgo.Record]int64{}, finished: map[*kgo.Record]bool{}, acked: map[string]bool{}}
}

func (m *inFlightMeter) OnProduceRecordPartitioned(r *kgo.Record, _ int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.finished[r] {
		return
	}
	n := int64(len(r.Key) + len(r.Value))
	m.held[r] = n
	m.bytes += n
	m.records++
	m.peak = max(m.peak, m.bytes)
}

func (m *inFlightMeter) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, ok := m.held[r]; ok {
		delete(m.held, r)
		m.bytes -= n
		m.records--
	} else {
		m.finished[r] = true
	}
	if err == nil {
		m.acked[string(r.Value)] = true
	}
}

func (m *inFlightMeter) state() (bytes, peak int64, records int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytes, m.peak, m.records
}

// The sink's in-flight bytes stay within MaxInFlightBytes while many
// records go through 16 executors, each of which could hold a record: the
// bound admits 4. First the broker holds every produce request (a kfake
// control function sleeping until the test opens the gate): the client
// admits 4 records, the other 12 executors wait in Execute rather than
// buffer, and no input is acked, none of its records being acknowledged.
// Then the gate opens and 2,000 records go through, the peak still at most
// the bound; every input is acked (the spout completes and commits all of
// them) and every record is in the output topic.
func TestSinkBoundsInFlightBytes(t *testing.T) {
	const recBytes, fit, executors = 1000, 4, 16
	const bound = fit*recBytes + recBytes/2
	n := size(2000, 500)
	c := startCluster(t, 1, "in", "out")
	c.produce(t, "in", 1, n)
	kc := c.k.Cluster()
	gate := make(chan struct{})
	kc.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		select {
		case <-gate:
		default:
			kc.SleepControl(func() { <-gate })
		}
		return nil, nil, false
	})
	var opened sync.Once
	open := func() { opened.Do(func() { close(gate) }) }

	meter := newInFlightMeter()
	var valued atomic.Int64
	sink, err := NewSink(SinkConfig{Brokers: c.k.Addrs(), Topic: "out", MaxInFlightBytes: bound,
		Value: func(tu *topology.Tuple) ([]byte, error) {
			valued.Add(1)
			v := fmt.Appendf(nil, "in@%d ", tu.Value(0).(*kgo.Record).Offset)
			return append(v, bytes.Repeat([]byte("."), recBytes-len(v))...), nil
		},
		Opts: []kgo.Opt{kgo.WithHooks(meter)}})
	if err != nil {
		t.Fatal(err)
	}
	sp, err := New(Config{Brokers: c.k.Addrs(), Topics: []string{"in"}, Group: "g", Logger: quietLogger(), CommitInterval: 10 * time.Millisecond,
		Opts: fastGroup})
	if err != nil {
		t.Fatal(err)
	}
	cfg := topology.Config{}
	cfg.Retry = topology.RetryPolicy{MaxAttempts: 1}
	b := topology.NewBuilder()
	b.Spout("records", func() topology.Spout { return sp }).Output(RecordField)
	b.Bolt("out", sink.Bolt).Executors(executors).Input("records", topology.Shuffle())
	top, err := b.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := top.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := contextWithTimeout()
	defer cancel()
	defer top.Stop(ctx)
	defer open() // before the stop, on a failure

	// Gate shut: every executor has its record, the bound admits fit.
	waitFor(t, "every executor producing, the bound's worth admitted", func() bool {
		held, _, recs := meter.state()
		if held > bound {
			t.Fatalf("gate shut: %d records, %d bytes admitted, over MaxInFlightBytes %d", recs, held, bound)
		}
		return valued.Load() == executors && recs == fit
	})
	if st := sp.Stats(); st.Completed != 0 || sink.Stats().Produced != 0 {
		t.Fatalf("with no record acknowledged: spout %d completed, sink %d produced", st.Completed, sink.Stats().Produced)
	}
	held, _, _ := meter.state()
	t.Logf("gate shut: %d executors in Execute, %d bytes admitted (bound %d), the rest waiting", valued.Load(), held, bound)
	open()
	waitFor(t, "every record done", func() bool { return sp.Stats().Completed == uint64(n) })
	c.waitCaughtUp(t, "g", "in")
	if err := top.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	_, peak, _ := meter.state()
	if peak > bound {
		t.Fatalf("%d bytes in flight at the peak, over MaxInFlightBytes %d", peak, bound)
	}
	if peak < fit*recBytes {
		t.Fatalf("peak %d bytes in flight: the bound (%d) was never pressed", peak, bound)
	}
	out := readTopic(t, c, "out")
	seen := map[string]bool{}
	for _, r := range out {
		seen[string(r.Value)] = true
	}
	meter.mu.Lock()
	acked := len(meter.acked)
	meter.mu.Unlock()
	if st := sink.Stats(); st.Produced != uint64(n) || st.Failed != 0 || len(seen) != n || acked != n {
		t.Fatalf("sink %+v, %d distinct records in the output, %d acknowledged; want %d", st, len(seen), acked, n)
	}
	t.Logf("%d records of %d bytes through %d executors: peak %d bytes in flight, bound %d", n, recBytes, executors, peak, bound)
}

func TestSinkConfigErrorsNameTheValue(t *testing.T) {
	val := func(*topology.Tuple) ([]byte, error) { return nil, nil }
	ok := SinkConfig{Brokers: []string{"127.0.0.1:9092"}, Topic: "t", Value: val}
	testkit.Refuses(t, ok, func(c SinkConfig) error { _, err := NewSink(c); return err }, []testkit.Refusal[SinkConfig]{
		{Edit: func(c *SinkConfig) { c.Brokers = nil }, Want: "kafka: SinkConfig.Brokers is empty"},
		{Edit: func(c *SinkConfig) { c.Brokers = []string{"a:1", ""} }, Want: `kafka: empty broker address in SinkConfig.Brokers ["a:1" ""]`},
		{Edit: func(c *SinkConfig) { c.Topic = "" }, Want: "kafka: SinkConfig.Topic is empty"},
		{Edit: func(c *SinkConfig) { c.Value = nil }, Want: "kafka: SinkConfig.Value is nil"},
		{Edit: func(c *SinkConfig) { c.MaxInFlightBytes = -1 }, Want: "kafka: SinkConfig.MaxInFlightBytes -1 is negative"},
		{Edit: func(c *SinkConfig) { c.ProduceTimeout = -time.Second }, Want: "kafka: SinkConfig.ProduceTimeout -1s is negative"},
	})
	s, err := NewSink(ok)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.cfg.MaxInFlightBytes != DefaultSinkMaxInFlightBytes || s.timeout != DefaultProduceTimeout {
		t.Errorf("defaults: %+v", s.cfg)
	}
}

// A broker that takes a produce request and does not answer it holds the
// record's outcome open: the client may not fail an idempotent record in
// flight, so it would wait past any deadline. The sink still fails the
// input once ProduceTimeout has passed, with a *ProduceError carrying the
// deadline, rather than hold the executor until the broker answers.
func TestSinkFailsAtProduceTimeoutWhileTheBrokerHoldsTheRequest(t *testing.T) {
	c := startCluster(t, 1, "out")
	kc := c.k.Cluster()
	gate, held := make(chan struct{}), make(chan struct{})
	var heldOnce sync.Once
	kc.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		heldOnce.Do(func() { close(held) })
		kc.SleepControl(func() { <-gate })
		return nil, nil, false
	})
	var opened sync.Once
	open := func() { opened.Do(func() { close(gate) }) }
	defer open()
	const timeout = 100 * time.Millisecond
	sink, err := NewSink(SinkConfig{Brokers: c.k.Addrs(), Topic: "out", ProduceTimeout: timeout,
		Value: func(*topology.Tuple) ([]byte, error) { return []byte("v"), nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	res := make(chan error, 1)
	go func() { res <- sink.produce(nil, nil) }()
	<-held // the request is at the broker: the record is in flight
	// The broker holds the request until the test ends; a produce that
	// waits for it is caught well before the client's own request
	// timeout (ten seconds and more) would end it.
	select {
	case err = <-res:
	case <-time.After(50 * timeout):
		open()
		t.Fatalf("produce still waiting %v after its ProduceTimeout %v, the broker holding the request", 50*timeout, timeout)
	}
	var pe *ProduceError
	if !errors.As(err, &pe) || pe.Topic != "out" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("produce: %v, want a *ProduceError for topic \"out\" wrapping context.DeadlineExceeded", err)
	}
	if st := sink.Stats(); st.Failed != 1 || st.Produced != 0 {
		t.Fatalf("stats %+v, want one failed", st)
	}
	open()
}
