package topology

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// breaker is a spout executor's retry-storm breaker (Config.Breaker):
// closed, open (nothing emitted or replayed until a time), or half open
// (Probes roots let through; all completing closes it, one failing opens
// it again for twice as long).
//
// It judges an outage, not a few messages that always fail: the failure
// rate counts first attempts only (a replay's outcome is not counted, so
// a poison message counts once however often it is replayed), and the
// probes are new messages: replays wait while it is open or half open,
// unless the spout has no new message to give (no task with room, or
// none emitted one for openFor since it went half open), when the
// oldest due replay is the probe.
type breaker struct {
	cfg        Breaker
	state      breakerState
	until      int64 // open: when to start probing
	halfSince  int64 // half open: since when
	openFor    time.Duration
	probesLeft int // half open: probes that may still start
	probesOK   int // half open: probes completed
	opens      uint64
	buckets    [breakerBuckets]bucket
}

type breakerState uint8

const (
	breakerClosed breakerState = iota
	breakerOpen
	breakerHalfOpen
)

// breakerBuckets splits the window, so that it slides in tenths.
const breakerBuckets = 10

type bucket struct {
	n        int64 // the bucket's index in time (now / width)
	ok, fail int
}

func (b *breaker) on() bool { return b.cfg.FailureRate > 0 }

// allowNew reports whether a new root may start now.
func (b *breaker) allowNew(int64) bool {
	return b.state == breakerClosed || b.state == breakerHalfOpen && b.probesLeft > 0
}

// allowReplay reports whether a replay may start now; roomForNew says
// whether the spout could be asked for a new message (a better probe).
func (b *breaker) allowReplay(now int64, roomForNew bool) bool {
	switch b.state {
	case breakerClosed:
		return true
	case breakerHalfOpen:
		return b.probesLeft > 0 && (!roomForNew || now-b.halfSince >= int64(b.openFor))
	}
	return false
}

// probing reports whether a root started now is a probe.
func (b *breaker) probing() bool { return b.state == breakerHalfOpen }

// record counts a root's outcome; first says it was the message's first
// attempt (only those count in the failure rate).
func (b *breaker) record(now int64, ok, probe, first bool) {
	if !b.on() {
		return
	}
	switch b.state {
	case breakerHalfOpen:
		if !probe {
			return // started before the breaker opened
		}
		if !ok {
			b.open(now, min(b.openFor*2, b.cfg.MaxOpenFor))
			return
		}
		if b.probesOK++; b.probesOK >= b.cfg.Probes {
			b.state = breakerClosed
			b.openFor = b.cfg.OpenFor
			b.buckets = [breakerBuckets]bucket{}
		}
		return
	case breakerOpen:
		return
	}
	if !first {
		return
	}
	width := max(int64(b.cfg.Window)/breakerBuckets, 1)
	n := now / width
	bk := &b.buckets[n%breakerBuckets]
	if bk.n != n {
		*bk = bucket{n: n}
	}
	if ok {
		bk.ok++
	} else {
		bk.fail++
	}
	var okSum, failSum int
	for i := range b.buckets {
		if c := &b.buckets[i]; c.n > n-breakerBuckets {
			okSum += c.ok
			failSum += c.fail
		}
	}
	if total := okSum + failSum; total >= b.cfg.MinOutcomes && float64(failSum) >= b.cfg.FailureRate*float64(total) {
		if b.openFor == 0 {
			b.openFor = b.cfg.OpenFor
		}
		b.open(now, b.openFor)
	}
}

func (b *breaker) open(now int64, d time.Duration) {
	b.state = breakerOpen
	b.openFor = d
	b.until = now + int64(d)
	b.opens++
}

// tick moves an open breaker to half open when its time is up, and copies
// its state to the executor's counters.
func (b *breaker) tick(now int64, m *counters) {
	if b.state == breakerOpen && now >= b.until {
		b.state = breakerHalfOpen
		b.halfSince = now
		b.probesLeft, b.probesOK = b.cfg.Probes, 0
	}
	m.BreakerOpens = b.opens
	m.BreakerOpen = 0
	if b.state != breakerClosed {
		m.BreakerOpen = 1
	}
}

// nextEvent is the time until the breaker's next change, if one is
// timed: the end of the open time, or, half open, when a replay may be
// the probe.
func (b *breaker) nextEvent(now int64) (time.Duration, bool) {
	switch {
	case b.state == breakerOpen:
		return time.Duration(max(b.until-now, 0)), true
	case b.state == breakerHalfOpen && b.probesLeft > 0:
		return time.Duration(max(b.halfSince+int64(b.openFor)-now, 0)), true
	}
	return 0, false
}

// adaptive is a spout executor's adaptive pending bound (Config.Adaptive):
// additive increase, multiplicative decrease, on the p99 of each
// interval's complete latencies.
type adaptive struct {
	cfg      Adaptive
	window   *hdrhistogram.Histogram // nil when off
	next     int64
	hitBound bool // some task reached the bound during the interval
}

func (a *adaptive) record(lat time.Duration) {
	if a.window != nil {
		recordLatency(a.window, lat)
	}
}

// tick returns a new bound at the end of each interval.
func (a *adaptive) tick(now int64, bound, maxBound int) (int, bool) {
	if a.window == nil {
		return bound, false
	}
	if a.next == 0 {
		a.next = now + int64(a.cfg.Interval)
		return bound, false
	}
	if now < a.next {
		return bound, false
	}
	a.next = now + int64(a.cfg.Interval)
	defer func() { a.window.Reset(); a.hitBound = false }()
	if a.window.TotalCount() == 0 {
		return bound, false
	}
	p99 := time.Duration(a.window.ValueAtQuantile(99)) * time.Microsecond
	nb := bound
	switch {
	case p99 > a.cfg.TargetP99:
		nb = max(a.cfg.Min, min(bound*3/4, bound-1))
	case p99*5 < a.cfg.TargetP99*4 && a.hitBound:
		nb = min(maxBound, bound+max(1, bound/8))
	}
	return nb, nb != bound
}

func (a *adaptive) nextEvent(now int64) (time.Duration, bool) {
	if a.window == nil || a.next == 0 {
		return 0, false
	}
	return time.Duration(max(a.next-now, 0)), true
}
