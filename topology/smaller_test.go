package topology

import (
	"errors"
	"net"
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

	const n = 500
	l, b := idsToSink(n)
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
		const n = 500
		l, b := idsToSink(n)
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
// in-process acker shard; at most once is only AtMostOnce.
func TestZeroConfigIsAtLeastOnce(t *testing.T) {
	const n = 300
	l, b := idsToSink(n)
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
// (Config.Idle, else ring.DefaultIdle) unless Acker.Idle says otherwise.
func TestAckerIdle(t *testing.T) {
	engine, own := ring.Idle{Spins: 7, Yields: 3}, ring.Idle{Spins: 9000, Yields: 1}
	for _, tc := range []struct {
		name string
		cfg  Config
		want ring.Idle
	}{
		{"default", Config{}, ring.DefaultIdle()},
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

// dupBolt acks (even ids, after emitting a child anchored to the input)
// or fails (odd ids) each input, then tries to ack and fail it again,
// sending what those return to errs.
type dupBolt struct{ errs chan error }

func (d dupBolt) Execute(t *Tuple, c *BoltCollector) {
	if t.Int(0)%2 == 0 {
		if err := c.Emit(t, t.Int(0)); err != nil {
			panic(err)
		}
		_ = c.Ack(t)
	} else {
		_ = c.Fail(t, errors.New("odd"))
	}
	d.errs <- c.Ack(t)
	d.errs <- c.Fail(t, nil)
}

// TestDuplicateAckFail: an Ack or Fail of a tuple already acked or failed
// returns an error naming the tuple and what happened to it, and sends
// nothing: the acked trees still complete (a second ACK would XOR the
// input's edge back in, and they would time out), and the acker gets one
// FAIL per failed tree.
func TestDuplicateAckFail(t *testing.T) {
	const n = 6
	errs := make(chan error, 2*n)
	l, b, _ := idSource(n)
	b.Bolt("dup", func() Bolt { return dupBolt{errs: errs} }).Input("ids", Shuffle()).Output("id")
	b.Bolt("sink", func() Bolt { return nopBolt{} }).Input("dup", Shuffle())
	cfg := testConfig()
	cfg.Retry.MaxAttempts = 1
	cfg.MessageTimeout = time.Minute // a tree broken by a second ACK would not end in the test's time
	cfg.DeadLetter = l.deadLetter
	top := start(t, b, cfg)
	waitDone(t, top, 30*time.Second)
	stop(t, top)
	close(errs)
	var acked, failed int
	for err := range errs {
		switch {
		case err == nil:
			t.Error("a second Ack or Fail returned nil")
		case !strings.Contains(err.Error(), `bolt "dup"`) || !strings.Contains(err.Error(), "of tuple from ids:default"):
			t.Errorf("err = %v, want it to name the bolt and the tuple", err)
		case strings.HasSuffix(err.Error(), "which was already acked"):
			acked++
		case strings.HasSuffix(err.Error(), "which was already failed"):
			failed++
		default:
			t.Errorf("err = %v, want it to say the tuple was already acked or failed", err)
		}
	}
	if acked != n || failed != n {
		t.Errorf("%d errors for acked tuples, %d for failed ones; want %d of each", acked, failed, n)
	}
	if s := l.check(t, n, false); s.completed != n/2 || s.deadLettered != n/2 {
		t.Errorf("completed %d, dead-lettered %d; want %d of each", s.completed, s.deadLettered, n/2)
	}
	m := top.Metrics()
	if c := m.Component("dup"); c.Acked != n/2 || c.Failed != n/2 {
		t.Errorf("dup: acked %d, failed %d; want %d of each", c.Acked, c.Failed, n/2)
	}
	if m.Acker == nil || m.Acker.Fails != n/2 {
		t.Errorf("acker: %+v; want %d FAILs", m.Acker, n/2)
	}
}

// TestAckAllocs: a bolt's Ack of a live tracked tuple (its ACK folded,
// the one before it sent to a real in-process acker) allocates nothing;
// the state check that refuses a second Ack costs no allocation either
// until it has an error to return.
func TestAckAllocs(t *testing.T) {
	b := NewBuilder()
	b.Spout("ids", newIDSpout(newLedger(), 1)).Output("id")
	b.Bolt("b", func() Bolt { return nopBolt{} }).Input("ids", Shuffle())
	top, err := b.Build(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	p, err := top.openPort(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	bx, sp := top.boltExecs[0], top.spoutExecs[0]
	bx.sender = p.Sender(bx.id)
	var tuples [2]Tuple
	for i := range tuples {
		root := uint64(i+1)<<sp.slotBits | uint64(i)
		sp.live[i].Store(root)
		tuples[i] = Tuple{dstTask: int32(bx.first)}
		tuples[i].anchors.one, tuples[i].anchors.n = anchor{root: root, edge: 7, spout: sp.ackTask[0], attempt: 1}, 1
	}
	k := 0
	allocs := testing.AllocsPerRun(1000, func() {
		tu := &tuples[k&1]
		k++
		tu.state = tupleLive
		if err := bx.ack(tu); err != nil {
			panic(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Ack: %v allocations a call, want 0", allocs)
	}
	if bx.m.Acked < 1000 || bx.m.LateAcks != 0 {
		t.Errorf("acked %d, late %d: the calls did not take the hot path", bx.m.Acked, bx.m.LateAcks)
	}
	bx.flush()
}
