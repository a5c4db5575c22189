package topology

import (
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/netio"
	"github.com/xorack/xorack/ring"
)

// TestConfigErrorsJoined: Build reports every problem of a Config, and
// the topology's own beside them.
func TestConfigErrorsJoined(t *testing.T) {
	b := NewBuilder()
	b.Spout("s", func() Spout { return nopSpout{} }).Output("x")
	b.Bolt("b", func() Bolt { return nopBolt{} }).Input("nowhere", Shuffle())
	_, err := b.Build(Config{Acker: acker.Config{Shards: -1}, RingSize: 1000, Retry: RetryPolicy{Jitter: 2}})
	for _, want := range []string{"Acker.Shards -1", "RingSize 1000", "Retry.Jitter 2", `"nowhere"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to contain %q", err, want)
		}
	}
}

// misdirect: the first of the bolt's two executors to get a tuple hands
// it to the other, which tries to ack, fail and anchor to it.
type misdirect struct {
	handoff chan *Tuple // cap 1
	errs    chan error
}

func (m misdirect) Execute(t *Tuple, c *BoltCollector) {
	select {
	case m.handoff <- t:
	default:
		other := <-m.handoff
		m.errs <- c.Ack(other)
		m.errs <- c.Fail(other, nil)
		m.errs <- c.Emit(other, 1)
		m.errs <- c.Ack(nil)
	}
	if err := c.Ack(t); err != nil {
		m.errs <- err
	}
}

// TestAckOfAnotherExecutorsTuple: Ack and Fail of a tuple delivered to
// another executor are errors, as Emit anchored to it is, and touch
// nothing: both messages complete.
func TestAckOfAnotherExecutorsTuple(t *testing.T) {
	l := newLedger()
	m := misdirect{handoff: make(chan *Tuple, 1), errs: make(chan error, 8)}
	b := NewBuilder()
	b.Spout("ids", newIDSpout(l, 2)).Output("id")
	b.Bolt("b", func() Bolt { return m }).Tasks(2).Executors(2).Input("ids", Shuffle()).Output("x")
	top := start(t, b, testConfig())
	var got []error
	for range 4 {
		got = append(got, <-m.errs)
	}
	waitDone(t, top, 30*time.Second)
	stop(t, top)
	for i, want := range []string{"Ack or Fail of tuple from ids:default", "Ack or Fail of tuple", "anchor tuple from ids", "nil tuple"} {
		if got[i] == nil || !strings.Contains(got[i].Error(), want) || !strings.Contains(got[i].Error(), "not delivered to this executor") && i < 3 {
			t.Errorf("call %d: err = %v, want %q", i, got[i], want)
		}
	}
	if s := l.check(t, 2, false); s.completed != 2 {
		t.Errorf("%d of 2 completed", s.completed)
	}
	select {
	case err := <-m.errs:
		t.Errorf("acking its own tuple: %v", err)
	default:
	}
}

// TestMetricsAckerOnNetio: while the topology runs on the network
// acker's client, Metrics().Acker has the client's counters (not only
// after Stop).
func TestMetricsAckerOnNetio(t *testing.T) {
	secret := []byte("topology-test-secret-0123456789")
	srv, err := netio.NewServer(netio.ServerConfig{Secret: secret, Shard: ackcore.Config{MaxPending: 1 << 12}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	defer func() { srv.Close(); <-served }()

	l := newLedger()
	const n = 500
	b := NewBuilder()
	b.Spout("ids", newIDSpout(l, n)).Output("id")
	b.Bolt("sink", func() Bolt { return nopBolt{} }).Input("ids", Shuffle())
	cfg := testConfig()
	ccfg := netio.ClientConfig{Hosts: []string{ln.Addr().String()}, Secret: secret}
	cfg.Port = func(s acker.Spec) (acker.Port, error) { return ccfg.Port(s) }
	top := start(t, b, cfg)
	waitDone(t, top, 30*time.Second)
	a := top.Metrics().Acker
	stop(t, top)
	if a == nil || a.Inits != n || a.Completed != n {
		t.Errorf("acker counters while running: %+v, want %d inits and completions", a, n)
	}
	l.check(t, n, false)
}

// TestAckerStats: AckerStats is Metrics().Acker alone: there while the
// topology runs, the final counters after Stop; at most once none.
func TestAckerStats(t *testing.T) {
	for _, ackers := range []int{0, 1} {
		l := newLedger()
		const n = 500
		b := NewBuilder()
		b.Spout("ids", newIDSpout(l, n)).Output("id")
		b.Bolt("sink", func() Bolt { return nopBolt{} }).Input("ids", Shuffle())
		cfg := testConfig()
		cfg.AtMostOnce = ackers == 0
		top := start(t, b, cfg)
		waitDone(t, top, 30*time.Second)
		if _, ok := top.AckerStats(); ok != (ackers > 0) {
			t.Errorf("ackers=%d: AckerStats ok %v while running", ackers, ok)
		}
		stop(t, top)
		final, ok := top.AckerStats()
		if m := top.Metrics().Acker; ok != (ackers > 0) || ok != (m != nil) || ok && (final != *m || final.Completed != n) {
			t.Errorf("ackers=%d: AckerStats %+v %v after Stop, Metrics().Acker %+v", ackers, final, ok, m)
		}
		l.check(t, n, false)
	}
}

// TestZeroConfigIsAtLeastOnce: the zero Config tracks every tree with one
// in-process acker shard, as DefaultConfig does; at most once is only
// AtMostOnce.
func TestZeroConfigIsAtLeastOnce(t *testing.T) {
	if !reflect.DeepEqual(DefaultConfig(), Config{}) {
		t.Errorf("DefaultConfig() = %+v, not the zero Config", DefaultConfig())
	}
	l := newLedger()
	const n = 300
	b := NewBuilder()
	b.Spout("ids", newIDSpout(l, n)).Output("id")
	b.Bolt("sink", func() Bolt { return nopBolt{} }).Input("ids", Shuffle())
	top := start(t, b, Config{})
	waitDone(t, top, 30*time.Second)
	stop(t, top)
	st, ok := top.AckerStats()
	if !ok || st.Inits != n || st.Completed != n {
		t.Errorf("zero Config: AckerStats %+v, %v; want %d roots tracked and completed", st, ok, n)
	}
	if got := top.Metrics().Component("ids").Latency.TotalCount(); got != n {
		t.Errorf("zero Config: %d complete latencies, want %d", got, n)
	}
	l.check(t, n, false)
}

// TestAckerIdle: the in-process acker waits as the engine does
// (Config.Idle, else DefaultIdle) unless Acker.Idle says otherwise.
func TestAckerIdle(t *testing.T) {
	engine, own := ring.Idle{Spins: 7, Yields: 3}, ring.Idle{Spins: 9000, Yields: 1}
	for _, tc := range []struct {
		name string
		cfg  Config
		want ring.Idle
	}{
		{"default", Config{}, DefaultIdle()},
		{"engine's", Config{Idle: &engine}, engine},
		{"acker's", Config{Idle: &engine, Acker: acker.Config{Idle: &own}}, own},
	} {
		b := NewBuilder()
		b.Spout("s", func() Spout { return nopSpout{} }).Output("x")
		top, err := b.Build(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := top.ackerCfg.Idle; got == nil || *got != tc.want {
			t.Errorf("%s: the acker's Idle %v, want %v", tc.name, got, tc.want)
		}
	}
}
