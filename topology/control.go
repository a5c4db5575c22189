package topology

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// breaker is a spout executor's retry-storm breaker (Config.Breaker):
// closed, open (new messages held until a time), or half open (Probes
// new messages let through; all completing closes it, one failing opens
// it again for twice as long).
//
// It judges an outage, and it never holds what it cannot judge:
//
//   - the failure rate counts first attempts only: a replay's outcome is
//     not counted, so a poison message counts once however often it is
//     replayed;
//   - a probe is a new message (one the spout emitted while the breaker
//     held it, or emits now): while the spout can give one, replays wait
//     for the probes to judge the outage;
//   - a probe that fails cannot tell an outage from a poison message (a
//     burst whose head failed, held by the breaker, may be nearly all
//     poison): it opens the breaker again, and every replay waiting then
//     goes at its own backoff, once in the breaker's episode (from its
//     opening to its close): one that completes closes it, one that
//     fails is not counted and waits again. A replay's first wait for
//     the breaker ends at the next failed probe, one opening at most; an
//     outage costs each replay one try more;
//   - when the spout cannot give one (every task done, none emitted a
//     new message for OpenFor while asked, or every held one is of a
//     task whose slots its replays fill), the breaker has nothing to
//     judge with: replays go at their own backoff, their failures neither
//     count nor reopen it (a poison message's replays are dead-lettered
//     at the breaker-off pace), and one that completes closes it (the
//     outage is over);
//   - a redelivery (a Redeliverer's message at attempt > 1) held by the
//     breaker may be a probe, but its failure gives the probe back
//     rather than reopening: it may have failed for its own reasons;
//   - OpenFor grows only when a probe of a new message fails.
//
// The spout's Next is called while the breaker is open (a task holds at
// most MaxSpoutPending new messages): its untracked tuples, a tick that
// flushes a join, keep flowing; its tracked ones are held.
type breaker struct {
	cfg        Breaker
	state      breakerState
	until      int64 // open: when to start probing
	openFor    time.Duration
	probesLeft int // half open: probes that may still start
	probesOK   int // half open: probes completed
	opens      uint64
	episode    uint64 // counts the times it left closed
	since      int64  // open or half open since (when it left closed)
	heldNs     int64  // the time it was open or half open before since
	buckets    [breakerBuckets]bucket
	// born counts first attempts by the bucket of their emit time:
	// started, and ended (any outcome); older counts those in flight
	// born before the ring's oldest bucket.
	born  [bornBuckets]bornBucket
	older int
}

// bornBuckets is how many buckets of the failure-rate window's width the
// in-flight count by emit time keeps apart (6.4 windows); roots in flight
// for longer are counted together.
const bornBuckets = 64

type bornBucket struct {
	n              int64
	started, ended int
}

type breakerState uint8

const (
	breakerClosed breakerState = iota
	breakerOpen
	breakerHalfOpen
)

// probeKind says what a root started while the breaker held the spout is
// to the breaker.
type probeKind uint8

const (
	probeNone probeKind = iota
	// probeNew: a new message, one of the half-open breaker's Probes.
	probeNew
	// probeRedelivery: a redelivered message standing in for a new one;
	// it took a probe, and gives it back if it fails.
	probeRedelivery
	// probeDry: a replay started while the breaker held the spout (the
	// spout had no new message to give, or a failed probe released the
	// replay); its completion closes the breaker, its failure is not
	// counted.
	probeDry
)

// breakerBuckets splits the window, so that it slides in tenths.
const breakerBuckets = 10

type bucket struct {
	n        int64 // the bucket's index in time (now / width)
	ok, fail int
}

func (b *breaker) on() bool { return b.cfg.FailureRate > 0 }

func (b *breaker) width() int64 { return max(int64(b.cfg.Window)/breakerBuckets, 1) }

// bornAt returns born's bucket, recycling an older one into older, or
// nil when born is older than the ring.
func (b *breaker) bornAt(born int64) *bornBucket {
	n := born / b.width()
	bk := &b.born[n%bornBuckets]
	switch {
	case bk.n == n:
		return bk
	case bk.n > n:
		return nil
	}
	b.older += bk.started - bk.ended
	*bk = bornBucket{n: n}
	return bk
}

// started counts a first attempt emitted at now.
func (b *breaker) started(now int64) {
	if b.on() {
		b.bornAt(now).started++
	}
}

// ended counts the end of a first attempt emitted at born.
func (b *breaker) ended(born int64) {
	if !b.on() {
		return
	}
	if bk := b.bornAt(born); bk != nil {
		bk.ended++
	} else {
		b.older--
	}
}

// inFlightSince counts the first attempts in flight emitted no later
// than born's bucket.
func (b *breaker) inFlightSince(born int64) int {
	n, sum := born/b.width(), b.older
	for i := range b.born {
		if bk := &b.born[i]; bk.n <= n {
			sum += bk.started - bk.ended
		}
	}
	return sum
}

// holding reports whether the breaker is open or half open.
func (b *breaker) holding() bool { return b.state != breakerClosed }

// allowNew reports whether a new message may start now.
func (b *breaker) allowNew() bool {
	return b.state == breakerClosed || b.state == breakerHalfOpen && b.probesLeft > 0
}

// startNew says what a new message (first reports whether it is its
// first attempt) started now is to the breaker, and takes a probe for
// it when half open.
func (b *breaker) startNew(first bool) (probeKind, uint64) {
	if b.state != breakerHalfOpen {
		return probeNone, 0
	}
	b.probesLeft--
	if first {
		return probeNew, b.opens
	}
	return probeRedelivery, b.opens
}

// record counts a root's outcome: kind and gen say what it was to the
// breaker when it started (gen: the opening it probed), first that it
// was the message's first attempt (only those count in the failure
// rate), born its emit time (ended was called for it). It reports
// whether a probe of a new message failed: the breaker opened again,
// and the replays waiting then get their try (see the type's doc).
//
// A failure is fast and a completion takes the whole tree, so right after
// a burst of emits (the start, a close that lets the held messages go)
// the outcomes come failures first. The rate therefore counts the first
// attempts still in flight that were emitted no later than the failed
// one (in its bucket of the window or before) as not failed: 47 fast failures of a burst of 256 whose 209 others
// are still being processed are 18%, not 100% (which reopened a closed
// breaker at every burst, for good). In an outage they fail too, or, when
// it is a hang, time out oldest first, with nothing older in flight.
func (b *breaker) record(now int64, ok bool, kind probeKind, gen uint64, first bool, born int64) (failedProbe bool) {
	if !b.on() {
		return false
	}
	if b.state != breakerClosed {
		switch {
		case kind == probeNone, kind != probeDry && gen != b.opens:
			// Started before the breaker opened, or a probe of an
			// earlier opening: it says nothing about this one.
		case ok && (kind == probeDry || b.probesOK+1 >= b.cfg.Probes):
			b.close(now)
		case ok:
			b.probesOK++
		case kind == probeNew && b.state == breakerHalfOpen:
			b.open(now, min(b.openFor*2, b.cfg.MaxOpenFor))
			return true
		case kind == probeRedelivery && b.state == breakerHalfOpen:
			b.probesLeft++
		}
		return false
	}
	if !first {
		return false
	}
	n := now / b.width()
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
	if total := okSum + failSum; !ok && total >= b.cfg.MinOutcomes &&
		float64(failSum) >= b.cfg.FailureRate*float64(total+b.inFlightSince(born)) {
		b.open(now, b.cfg.OpenFor)
	}
	return false
}

func (b *breaker) open(now int64, d time.Duration) {
	if b.state == breakerClosed {
		b.since = now
		b.episode++
	}
	b.state = breakerOpen
	b.openFor = d
	b.until = now + int64(d)
	b.opens++
}

func (b *breaker) close(now int64) {
	b.heldNs += now - b.since
	b.state = breakerClosed
	b.openFor = b.cfg.OpenFor
	b.buckets = [breakerBuckets]bucket{}
}

// tick moves an open breaker to half open when its time is up (and
// reports that it did: the probes may start), and copies its state to
// the executor's counters.
func (b *breaker) tick(now int64, m *counters) bool {
	moved := false
	if b.state == breakerOpen && now >= b.until {
		b.state = breakerHalfOpen
		b.probesLeft, b.probesOK = b.cfg.Probes, 0
		moved = true
	}
	m.BreakerOpens = b.opens
	m.BreakerOpen = 0
	m.BreakerHeldNs = uint64(b.heldNs)
	if b.state != breakerClosed {
		m.BreakerOpen = 1
		m.BreakerHeldNs += uint64(max(now-b.since, 0))
	}
	return moved
}

// nextEvent is the time until the breaker's next timed change: the end
// of the open time.
func (b *breaker) nextEvent(now int64) (time.Duration, bool) {
	if b.state == breakerOpen {
		return time.Duration(max(b.until-now, 0)), true
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
