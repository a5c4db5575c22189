package topology

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// pacedSpout emits ids [0, poison) at once, then one id of the rest per
// every: the poison workload (the pacing is the workload's shape, not a
// synchronisation).
type pacedSpout struct {
	l         *ledger
	n, poison int
	every     time.Duration
	next      int
	began     time.Time
}

func (s *pacedSpout) Next(c *SpoutCollector) {
	if s.next >= s.n {
		c.Done()
		return
	}
	if s.began.IsZero() {
		s.began = time.Now()
	}
	if s.next >= s.poison && time.Since(s.began) < time.Duration(s.next-s.poison)*s.every {
		return
	}
	if err := c.Emit(s.next, s.next); err != nil {
		panic(err)
	}
	s.next++
}

func (s *pacedSpout) Ack(id any)              { s.l.ack(id.(int)) }
func (s *pacedSpout) Fail(id any, f *Failure) { s.l.fail(id.(int), f) }

// poisonFirst fails every attempt of ids below poison.
type poisonFirst struct {
	l      *ledger
	poison int
}

func (p poisonFirst) Execute(t *Tuple, c *BoltCollector) {
	if t.Int(0) < p.poison {
		_ = c.Fail(t, errors.New("poison"))
		return
	}
	p.l.process(t.Int(0), t.Attempt())
	_ = c.Ack(t)
}

// TestBreakerPoison: 30 poison messages first, then 170 healthy ones one
// per 10 ms, 6 attempts each, the breaker on at a failure rate of 0.5.
// The poison's first attempts may open it once; its replays do not count
// and are not the probes, so it closes on the first healthy message and
// stays closed: every healthy message completes at its first attempt,
// and the poison is dead-lettered after its 6 attempts. (Before: 12
// openings, nothing acked after 60 s.)
func TestBreakerPoison(t *testing.T) {
	for _, on := range []bool{false, true} {
		l := newLedger()
		const n, poison = 200, 30
		b := NewBuilder()
		b.Spout("ids", func() Spout { return &pacedSpout{l: l, n: n, poison: poison, every: 10 * time.Millisecond} }).Output("id")
		b.Bolt("check", func() Bolt { return poisonFirst{l: l, poison: poison} }).Input("ids", Shuffle())
		cfg := DefaultConfig()
		cfg.Retry.MaxAttempts = 6
		if on {
			cfg.Breaker = Breaker{FailureRate: 0.5}
		}
		cfg.DeadLetter = l.deadLetter
		began := time.Now()
		top := start(t, b, cfg)
		waitDone(t, top, 2*time.Minute)
		took := time.Since(began)
		stop(t, top)
		s := l.check(t, n, false)
		sp := top.Metrics().Component("ids")
		if s.completed != n-poison || s.deadLettered != poison || sp.BreakerOpens > 1 {
			t.Errorf("breaker %v: completed %d, dead-lettered %d, breaker openings %d; want %d, %d, at most 1",
				on, s.completed, s.deadLettered, sp.BreakerOpens, n-poison, poison)
		}
		for id, a := range l.attempts {
			if a != 1 {
				t.Errorf("healthy msg %d completed at attempt %d", id, a)
			}
		}
		for id, ds := range l.dead {
			if ds[0].Failure.Attempts != 6 {
				t.Errorf("poison msg %d dead-lettered after %d attempts", id, ds[0].Failure.Attempts)
			}
		}
		t.Logf("breaker %v: done in %v, %d openings", on, took.Round(time.Millisecond), sp.BreakerOpens)
	}
}

// idleSpout emits ids [0, n) and then nothing, not calling Done until
// every one was acked: a source with nothing new.
type idleSpout struct {
	l     *ledger
	n     int
	next  int
	acked int
}

func (s *idleSpout) Next(c *SpoutCollector) {
	switch {
	case s.next < s.n:
		_ = c.Emit(s.next, s.next)
		s.next++
	case s.acked == s.n:
		c.Done()
	}
}
func (s *idleSpout) Ack(id any)              { s.acked++; s.l.ack(id.(int)) }
func (s *idleSpout) Fail(id any, f *Failure) { s.l.fail(id.(int), f) }

// TestBreakerIdleSource: a half-open breaker whose spout has room but no
// new message lets a replay be the probe, OpenFor after it went half
// open: an outage over, the replays complete (rather than waiting for a
// new message that never comes).
func TestBreakerIdleSource(t *testing.T) {
	l := newLedger()
	const n = 40
	var down atomic.Bool
	var failed atomic.Int64
	down.Store(true)
	b := NewBuilder()
	b.Spout("ids", func() Spout { return &idleSpout{l: l, n: n} }).Output("id")
	b.Bolt("db", func() Bolt { return &outageBolt{l: l, down: &down, failed: &failed} }).Input("ids", Shuffle())
	cfg := testConfig()
	cfg.Retry = RetryPolicy{MaxAttempts: 1000, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
	cfg.Breaker = Breaker{FailureRate: 0.5, MinOutcomes: 20, OpenFor: 10 * time.Millisecond, MaxOpenFor: 20 * time.Millisecond}
	top := start(t, b, cfg)
	sp := func() *ComponentMetrics { m := top.Metrics(); return m.Component("ids") }
	waitFor(t, 20*time.Second, "the breaker to open", func() bool { return sp().BreakerOpens >= 1 })
	down.Store(false)
	waitDone(t, top, 60*time.Second)
	stop(t, top)
	if s := l.check(t, n, false); s.completed != n {
		t.Errorf("completed %d of %d", s.completed, n)
	}
	if c := sp(); c.BreakerOpen != 0 || c.Replayed == 0 {
		t.Errorf("breaker open %d at the end, %d replays", c.BreakerOpen, c.Replayed)
	}
}
