package topology

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// The fault tests: each asserts that every message ends completed or
// dead-lettered (or, at shutdown, stopped), exactly once, with nothing
// lost, and logs how many duplicates the sink processed.

// recordingSink acks every input, recording it (child 0 only) first.
func recordingSink(l *ledger) func() Bolt { return func() Bolt { return &sink{l: l} } }

// flakyBolt fails a fraction of its inputs at random, else records and
// acks them.
type flakyBolt struct {
	l    *ledger
	rate float64
	rng  *rand.Rand
}

func (f *flakyBolt) Open(ctx TaskContext) error {
	f.rng = rand.New(rand.NewPCG(uint64(ctx.Task), 99))
	return nil
}

func (f *flakyBolt) Execute(t *Tuple, c *BoltCollector) {
	if f.rng.Float64() < f.rate {
		c.Fail(t, errors.New("flaky"))
		return
	}
	if t.Int(1) == 0 {
		f.l.process(t.Int(0), t.Attempt())
	}
	c.Ack(t)
}

func TestFaultFailingBolt(t *testing.T) {
	const n = 4000
	l, b, ids := idSource(n)
	ids.Tasks(2)
	b.Bolt("fan", fanout(3)).Input("ids", Shuffle()).Output("id", "k")
	b.Bolt("flaky", func() Bolt { return &flakyBolt{l: l, rate: 0.05} }).Tasks(2).Input("fan", Fields("id"))
	cfg := testConfig()
	cfg.DeadLetter = l.deadLetter
	top := start(t, b, cfg)
	waitDone(t, top, 60*time.Second)
	stop(t, top)
	s := l.check(t, n, false)
	sp := top.Metrics().Component("ids")
	if s.completed+s.deadLettered != n || sp.FailedExplicit == 0 {
		t.Errorf("completed %d dead %d; explicit failures %d (want some)", s.completed, s.deadLettered, sp.FailedExplicit)
	}
	if sp.Replayed+sp.DeadLettered != sp.FailedExplicit {
		t.Errorf("replayed %d + dead-lettered %d != failed attempts %d", sp.Replayed, sp.DeadLettered, sp.FailedExplicit)
	}
	t.Logf("failed attempts %d, replayed %d, late acks %d", sp.FailedExplicit, sp.Replayed, top.Metrics().Component("flaky").LateAcks)
}

func TestFaultDropsInTransit(t *testing.T) {
	const n = 2000
	l, b, _ := idSource(n)
	b.Bolt("fan", fanout(4)).Tasks(2).Input("ids", Shuffle()).Output("id", "k")
	b.Bolt("sink", recordingSink(l)).Input("fan", Fields("id"))
	cfg := testConfig()
	cfg.MessageTimeout = 150 * time.Millisecond // a short clock: dropped trees time out fast
	cfg.DeadLetter = l.deadLetter
	top, err := b.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	var drops atomic.Int64
	top.dropHook = func(*Tuple) bool {
		mu.Lock()
		defer mu.Unlock()
		if rng.Float64() < 0.02 {
			drops.Add(1)
			return true
		}
		return false
	}
	if err := top.Start(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, top, 60*time.Second)
	stop(t, top)
	s := l.check(t, n, false)
	m := top.Metrics()
	sp := m.Component("ids")
	dropped := m.Component("fan").Dropped + m.Component("sink").Dropped
	if dropped != uint64(drops.Load()) || dropped == 0 {
		t.Errorf("dropped counted %d, injected %d", dropped, drops.Load())
	}
	if sp.FailedTimeout == 0 {
		t.Error("no timeouts, yet tuples were dropped")
	}
	if s.completed+s.deadLettered != n {
		t.Errorf("completed %d + dead-lettered %d != %d", s.completed, s.deadLettered, n)
	}
	t.Logf("dropped %d tuples; %d timeouts, %d replays", dropped, sp.FailedTimeout, sp.Replayed)
}

// slowBolt takes d per input for its first inputs (a slow downstream:
// the sleep is the work, not a synchronisation).
type slowBolt struct {
	l    *ledger
	d    time.Duration
	slow *atomic.Int64 // inputs still to run slowly
	// all, when set, is closed once the spout has emitted every root: the
	// first input waits for it (at most 10 s), so that every root is
	// queued before the slow work starts, however slowly a loaded
	// machine runs the spout.
	all <-chan struct{}
}

func (s *slowBolt) Execute(t *Tuple, c *BoltCollector) {
	if s.all != nil {
		select {
		case <-s.all:
		case <-time.After(10 * time.Second):
		}
		s.all = nil
	}
	if s.slow.Add(-1) >= 0 {
		time.Sleep(s.d)
	}
	s.l.process(t.Int(0), t.Attempt())
	c.Ack(t)
}

func TestFaultSlowBolt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pending int
		n       int
		slow    int           // inputs that take 1 ms
		timeout time.Duration // the message timeout
		storm   bool
	}{
		// 16 pending at 1 ms each (at least) is 16 ms of queue: 125x
		// under the 2 s timeout, room for a busy machine's stretched
		// sleeps and scheduling (250 ms saw timeouts there). Without the
		// bound, the 2,500 ms or more of slow inputs emitted at once
		// would time out.
		{"bounded", 16, 2500, 2500, 2 * time.Second, false},
		// The contrast: with every root emitted before the slow bolt
		// starts (it waits for the last emit), the queue in front of it
		// is 300 ms or more: a timeout storm.
		{"unbounded", 1 << 14, 600, 300, 250 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			var slow atomic.Int64
			slow.Store(int64(tc.slow))
			var all chan struct{}
			spout := newIDSpout(l, tc.n)
			if tc.storm {
				all = make(chan struct{})
				var emitted atomic.Int64
				spout = func() Spout {
					return &idSpout{l: l, n: tc.n, gate: func(int) bool {
						if emitted.Add(1) == int64(tc.n) {
							close(all)
						}
						return true
					}}
				}
			}
			b := NewBuilder()
			b.Spout("ids", spout).Output("id")
			b.Bolt("slow", func() Bolt { return &slowBolt{l: l, d: time.Millisecond, slow: &slow, all: all} }).Input("ids", Shuffle())
			cfg := testConfig()
			cfg.MessageTimeout = tc.timeout
			cfg.MaxSpoutPending = tc.pending
			cfg.Batch = 1 // a slow bolt publishes its acks after each input
			cfg.Retry.MaxAttempts = 3
			cfg.DeadLetter = l.deadLetter
			top := start(t, b, cfg)
			waitDone(t, top, 60*time.Second)
			stop(t, top)
			s := l.check(t, tc.n, false)
			sp := top.Metrics().Component("ids")
			t.Logf("pending high %d, timeouts %d, replays %d", sp.PendingHigh, sp.FailedTimeout, sp.Replayed)
			if !tc.storm {
				if sp.PendingHigh > tc.pending || sp.FailedTimeout != 0 || s.completed != tc.n {
					t.Errorf("max spout pending %d: pending high %d, %d timeouts, %d completed of %d",
						tc.pending, sp.PendingHigh, sp.FailedTimeout, s.completed, tc.n)
				}
			} else if sp.FailedTimeout == 0 {
				t.Error("unbounded: no timeouts (the contrast did not show)")
			}
		})
	}
}

// poisonBolt fails every input whose id is poison, else records and acks.
type poisonBolt struct {
	l        *ledger
	poison   int
	attempts *sync.Map // id -> []int attempts seen
}

func (p *poisonBolt) Execute(t *Tuple, c *BoltCollector) {
	id := t.Int(0)
	if id == p.poison {
		v, _ := p.attempts.LoadOrStore(id, &[]int{})
		s := v.(*[]int)
		*s = append(*s, t.Attempt())
		c.Fail(t, errors.New("poison"))
		return
	}
	p.l.process(id, t.Attempt())
	c.Ack(t)
}

func TestFaultPoisonMessage(t *testing.T) {
	const n, poison = 1000, 137
	var seen sync.Map
	l, b, _ := idSource(n)
	b.Bolt("check", func() Bolt { return &poisonBolt{l: l, poison: poison, attempts: &seen} }).Tasks(2).Input("ids", Fields("id"))
	cfg := testConfig()
	cfg.Retry.MaxAttempts = 4
	cfg.DeadLetter = l.deadLetter
	top := start(t, b, cfg)
	waitDone(t, top, 30*time.Second)
	stop(t, top)
	s := l.check(t, n, false)
	if s.completed != n-1 || s.deadLettered != 1 {
		t.Fatalf("completed %d dead %d, want %d and 1", s.completed, s.deadLettered, n-1)
	}
	d := l.dead[poison][0]
	f := l.failed[poison][0]
	if d.Failure.Attempts != 4 || d.Failure.Reason != ackcore.ReasonExplicit || d.Failure.Err == nil || d.Failure.Err.Error() != "poison" ||
		len(d.Values) != 1 || d.Values[0] != poison || d.Component != "ids" || f.Attempts != 4 || !errors.Is(&f, f.Err) {
		t.Errorf("dead letter %+v, spout failure %+v", d, f)
	}
	v, _ := seen.Load(poison)
	if got := *v.(*[]int); len(got) != 4 || got[0] != 1 || got[3] != 4 {
		t.Errorf("the bolt saw attempts %v, want [1 2 3 4]", got)
	}
	for id, a := range l.attempts {
		if a != 1 {
			t.Errorf("msg %d reached attempt %d; only the poison message should be replayed", id, a)
		}
	}
}

// joinBolt joins left and right tuples by id: it holds the first to come,
// and on its partner emits one child anchored to both (multi-anchoring)
// and acks both. A replayed left whose right was already joined is
// re-emitted anchored to itself only.
type joinBolt struct {
	held      map[int]*Tuple // by id, left or right waiting for its partner
	rightSeen map[int]bool
}

func (j *joinBolt) Execute(t *Tuple, c *BoltCollector) {
	if j.held == nil {
		j.held, j.rightSeen = map[int]*Tuple{}, map[int]bool{}
	}
	id := t.Int(0)
	left := t.Source() == "left"
	if left && j.rightSeen[id] {
		if err := c.Emit(t, id, 0); err != nil {
			panic(err)
		}
		c.Ack(t)
		return
	}
	other, ok := j.held[id]
	if !ok || (other.Source() == "left") == left {
		if ok {
			c.Ack(other) // a replayed left replaces the failed one it finds
		}
		j.held[id] = t
		return
	}
	delete(j.held, id)
	j.rightSeen[id] = true
	if err := c.EmitMulti([]*Tuple{t, other}, id, 0); err != nil {
		panic(err)
	}
	c.Ack(t)
	c.Ack(other)
}

// auditBolt fails the first attempt of every fifth left tuple.
type auditBolt struct{}

func (auditBolt) Execute(t *Tuple, c *BoltCollector) {
	if t.Int(0)%5 == 0 && t.Attempt() == 1 {
		c.Fail(t, errors.New("audit"))
		return
	}
	c.Ack(t)
}

func TestFaultJoinOneParentFails(t *testing.T) {
	left, right, joined := newLedger(), newLedger(), newLedger()
	const n = 1000
	b := NewBuilder()
	b.Spout("left", newIDSpout(left, n)).Output("id")
	b.Spout("right", newIDSpout(right, n)).Output("id")
	b.Bolt("audit", func() Bolt { return auditBolt{} }).Input("left", Shuffle())
	b.Bolt("join", func() Bolt { return &joinBolt{} }).Tasks(2).
		Input("left", Fields("id")).Input("right", Fields("id")).Output("id", "k")
	b.Bolt("sink", recordingSink(joined)).Input("join", Shuffle())
	cfg := testConfig()
	cfg.DeadLetter = func(d DeadLetter) { t.Errorf("dead letter %+v", d) }
	top := start(t, b, cfg)
	waitDone(t, top, 30*time.Second)
	stop(t, top)
	if s := left.check(t, n, false); s.completed != n {
		t.Errorf("left: %d of %d completed", s.completed, n)
	}
	if s := right.check(t, n, false); s.completed != n {
		t.Errorf("right: %d of %d completed", s.completed, n)
	}
	m := top.Metrics()
	l, r := m.Component("left"), m.Component("right")
	if l.FailedExplicit != n/5 || l.Replayed != n/5 {
		t.Errorf("left: %d explicit failures, %d replays; want %d each", l.FailedExplicit, l.Replayed, n/5)
	}
	if r.FailedExplicit+r.FailedTimeout != 0 || r.Replayed != 0 {
		t.Errorf("right: %d failures, %d replays; a failing left parent must not fail its right partner", r.FailedExplicit+r.FailedTimeout, r.Replayed)
	}
	joined.mu.Lock()
	dups := 0
	for id := range n {
		if joined.processed[id] == 0 {
			t.Errorf("id %d never joined", id)
		}
		dups += joined.processed[id] - 1
	}
	joined.mu.Unlock()
	t.Logf("joined children processed twice: %d; late acks at join %d, sink %d", dups, m.Component("join").LateAcks, m.Component("sink").LateAcks)
}

// addOutage adds a database that is down at first: bolt "db", fed by
// spout "ids", fails every tuple while down is set, counting them in
// failed.
func addOutage(b *Builder, l *ledger) (down *atomic.Bool, failed *atomic.Int64) {
	down, failed = new(atomic.Bool), new(atomic.Int64)
	down.Store(true)
	b.Bolt("db", func() Bolt { return &outageBolt{l: l, down: down, failed: failed} }).Input("ids", Shuffle())
	return down, failed
}

// outageRetry replays a failed root at once and all but without end: an
// outage's failures are for the breaker to bound.
var outageRetry = RetryPolicy{MaxAttempts: 1000, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}

// outageBolt fails everything while down is set.
type outageBolt struct {
	l      *ledger
	down   *atomic.Bool
	failed *atomic.Int64
}

func (o *outageBolt) Execute(t *Tuple, c *BoltCollector) {
	if o.down.Load() {
		o.failed.Add(1)
		c.Fail(t, errors.New("downstream outage"))
		return
	}
	o.l.process(t.Int(0), t.Attempt())
	c.Ack(t)
}

func TestFaultOutageBreaker(t *testing.T) {
	const n = 3000
	l, b, _ := idSource(n)
	down, failedDuringOutage := addOutage(b, l)
	cfg := testConfig()
	cfg.MaxSpoutPending = 64
	cfg.Retry = outageRetry
	cfg.Breaker = Breaker{FailureRate: 0.5, Window: time.Second, MinOutcomes: 20, OpenFor: 10 * time.Millisecond, MaxOpenFor: 40 * time.Millisecond}
	cfg.DeadLetter = l.deadLetter
	top := start(t, b, cfg)
	sp := func() *ComponentMetrics { m := top.Metrics(); return m.Component("ids") }
	waitFor(t, 20*time.Second, "the breaker to open and fail its probes three times", func() bool { return sp().BreakerOpens >= 4 })
	if c := sp(); c.BreakerOpen != 1 || c.Completed != 0 {
		t.Fatalf("during the outage: breaker open %d, completed %d", c.BreakerOpen, c.Completed)
	}
	during := failedDuringOutage.Load()
	down.Store(false)
	waitDone(t, top, 60*time.Second)
	stop(t, top)
	s := l.check(t, n, false)
	c := sp()
	if s.completed != n || c.BreakerOpen != 0 {
		t.Errorf("completed %d of %d; breaker open at the end: %d", s.completed, n, c.BreakerOpen)
	}
	if limit := outageLimit(64, c.BreakerOpens); during > limit {
		t.Errorf("%d failures during the outage (%d openings), want at most %d", during, c.BreakerOpens, limit)
	}
	t.Logf("failures during the outage %d, breaker openings %d", during, c.BreakerOpens)
}

// gateBolt blocks in Execute on its first input until the gate opens, and
// fails the first attempt of every seventh id.
type gateBolt struct {
	l    *ledger
	gate chan struct{}
}

func (g *gateBolt) Execute(t *Tuple, c *BoltCollector) {
	<-g.gate
	if t.Int(0)%7 == 0 && t.Attempt() == 1 {
		c.Fail(t, errors.New("retry me later"))
		return
	}
	g.l.process(t.Int(0), t.Attempt())
	c.Ack(t)
}

// gatedTopology is 100,000 ids into a gateBolt, 200 pending at most, the
// bolt publishing its acks after each input; cfg adjusts the config.
func gatedTopology(t *testing.T, l *ledger, gate chan struct{}, adjust func(*Config)) (*Topology, func() *ComponentMetrics) {
	b := NewBuilder()
	b.Spout("ids", newIDSpout(l, 100000)).Output("id")
	b.Bolt("gated", func() Bolt { return &gateBolt{l: l, gate: gate} }).Input("ids", Shuffle())
	cfg := testConfig()
	cfg.MaxSpoutPending = 200
	cfg.Batch = 1
	if adjust != nil {
		adjust(&cfg)
	}
	top := start(t, b, cfg)
	return top, func() *ComponentMetrics { m := top.Metrics(); return m.Component("ids") }
}

func TestFaultShutdownMidRun(t *testing.T) {
	l := newLedger()
	gate := make(chan struct{})
	top, sp := gatedTopology(t, l, gate, func(cfg *Config) {
		cfg.Retry.Backoff, cfg.Retry.MaxBackoff = time.Hour, time.Hour // failed roots wait for a replay at the stop
	})
	// Let some through, then hold the bolt with a full pending window.
	for range 50 {
		gate <- struct{}{}
	}
	// Each input let through ends in an ack or a fail (every seventh id
	// fails its first attempt and waits an hour): once all 50 have their
	// outcome and the window is full again, no slot frees before the stop,
	// so the spout has emitted all it will.
	waitFor(t, 20*time.Second, "an outcome for each input let through", func() bool { m := sp(); return m.Completed+m.FailedExplicit >= 50 })
	waitFor(t, 20*time.Second, "a full window in flight", func() bool { m := sp(); return m.Pending-m.Waiting == 200 })
	emitted := int(sp().Emitted)
	// Stop drains until its context ends: end it while the bolt is held,
	// so what is pending then is reported stopped.
	stopped := make(chan error)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { stopped <- top.Stop(ctx) }()
	waitFor(t, 20*time.Second, "the drain to begin", top.draining.Load)
	cancel()
	waitFor(t, 20*time.Second, "a final outcome for every emitted message", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.acked)+len(l.failed) >= emitted
	})
	close(gate)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if got := int(sp().Emitted); got != emitted {
		t.Fatalf("emitted %d after the stop began, %d before", got, emitted)
	}
	s := l.check(t, emitted, true)
	if s.stopped == 0 || s.completed == 0 {
		t.Errorf("stopped %d, completed %d: want some of each", s.stopped, s.completed)
	}
	c := sp()
	if c.Pending != 0 || c.FailedFinal != uint64(s.stopped) {
		t.Errorf("after the stop: pending %d, final failures %d (stopped %d)", c.Pending, c.FailedFinal, s.stopped)
	}
	t.Logf("emitted %d before the stop; %d completed, %d reported stopped (%d of them waiting for a replay)", emitted, s.completed, s.stopped, c.FailedExplicit)
}

func start(t *testing.T, b *Builder, cfg Config) *Topology {
	t.Helper()
	top, err := b.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := top.Start(); err != nil {
		t.Fatal(err)
	}
	return top
}

// holdBolt fails the first attempts of ids below fail at once and
// leaves every other input unacked (in flight until the stop).
type holdBolt struct {
	fail int
}

func (h holdBolt) Execute(t *Tuple, c *BoltCollector) {
	if t.Int(0) < h.fail && t.Attempt() == 1 {
		c.Fail(t, errors.New("first attempt"))
	}
}

// TestWaitingDoesNotHoldTheWindow: roots waiting out a long backoff do not
// count against MaxSpoutPending, so a full window stays in flight beside
// them (with waiting roots counted, 5 waiting would leave room for 5).
func TestWaitingDoesNotHoldTheWindow(t *testing.T) {
	l := newLedger()
	b := NewBuilder()
	b.Spout("ids", newIDSpout(l, 1000)).Output("id")
	b.Bolt("hold", func() Bolt { return holdBolt{fail: 5} }).Input("ids", Shuffle())
	cfg := testConfig()
	cfg.MaxSpoutPending = 10
	cfg.Retry.Backoff, cfg.Retry.MaxBackoff = time.Hour, time.Hour
	top := start(t, b, cfg)
	sp := func() *ComponentMetrics { return top.Metrics().Component("ids") }
	waitFor(t, 20*time.Second, "5 waiting and a full window in flight", func() bool {
		m := sp()
		return m.Waiting == 5 && m.Pending-m.Waiting == 10
	})
	if m := sp(); m.Emitted != 15 {
		t.Errorf("emitted %d with 10 in flight and 5 waiting, want 15", m.Emitted)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_ = top.Stop(ctx)
}
