package ring

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Default idle strategy. A re-check of the peer's index costs about a
// nanosecond while the line is unchanged in our cache, so DefaultSpins covers
// roughly the 0.4 µs a peer needs to fill or drain a 64-item batch on the
// 2-vCPU machines this was tuned on (6.4 ns/item in batches of 64 in
// BenchmarkRing then; BENCHMARKS.md's ring section has today's 3-5 ns).
// Each Gosched then
// costs a trip through the scheduler, a few hundred nanoseconds, and lets
// another goroutine use the P; DefaultYields of them add a few microseconds
// before the waiter pays for a park and a wake-up, which costs tens of
// microseconds when the OS thread has to be woken.
const (
	DefaultSpins  = 512
	DefaultYields = 16
)

// Idle says how a blocking call waits: it re-checks the ring Spins times in
// a tight loop, then Yields times with runtime.Gosched between checks, then
// parks until its peer or Close wakes it. Negative counts are taken as zero;
// Idle{} parks at once.
type Idle struct {
	Spins  int
	Yields int
}

// DefaultIdle returns Idle{DefaultSpins, DefaultYields}.
func DefaultIdle() Idle { return Idle{Spins: DefaultSpins, Yields: DefaultYields} }

func (i Idle) normalized() Idle {
	return Idle{Spins: max(i.Spins, 0), Yields: max(i.Yields, 0)}
}

// step runs the spin or yield phase for attempt n (counted from 0) and
// reports whether the caller should park instead.
func (i Idle) step(n int) (park bool) {
	switch {
	case n < i.Spins:
		return false
	case n < i.Spins+i.Yields:
		runtime.Gosched()
		return false
	}
	return true
}

// parker lets one goroutine sleep until another wakes it.
//
// The protocol is a Dekker pair on sequentially consistent atomics (all of
// sync/atomic is sequentially consistent in the Go memory model):
//
//	sleeper: flag.Store(1); re-check the condition; if still unmet, <-ch
//	waker:   make the condition true (atomic store); if flag.Load() == 1 and
//	         flag.Swap(0) == 1 { ch <- token }
//
// Either the sleeper's re-check sees the waker's store, or the waker's load
// sees the flag, so a wake-up is never lost. Whoever swaps the flag from 1
// to 0 owns the wake-up: a waker that wins sends exactly one token, and the
// sleeper receives exactly one token per won swap (in wait, or in cancel when
// its own re-check succeeded but a waker had already won). So ch is empty
// whenever flag is set, and the send never blocks: ch has room for one.
type parker struct {
	flag atomic.Uint32 // 1 while the sleeper is parked or about to park
	ch   chan struct{} // immutable after init; holds at most one token
}

func (p *parker) init() { p.ch = make(chan struct{}, 1) }

// prepare announces that the sleeper is about to park. The caller must then
// re-check its condition and call either cancel or wait.
func (p *parker) prepare() { p.flag.Store(1) }

// cancel withdraws a prepare whose re-check found the condition met.
func (p *parker) cancel() {
	if p.flag.Swap(0) == 0 {
		// A waker won the flag; its token is in ch or about to be.
		<-p.ch
	}
}

// wait sleeps until a waker hands over a token.
func (p *parker) wait() { <-p.ch }

// sleep is the park protocol in one call: prepare, then cancel if ready
// (re-checked after the prepare, so that no wake-up is lost), else wait.
func (p *parker) sleep(ready func() bool) {
	p.prepare()
	if ready() {
		p.cancel()
		return
	}
	p.wait()
}

// await is a consumer's blocking take: try until it takes something (its
// result, true), waiting with awaitItems between tries; the zero value and
// false once awaitItems reports the rings closed and empty. Small enough
// to inline, so that try and awaitItems are direct calls in the caller.
func await[V any](try func() (V, bool), awaitItems func() bool) (V, bool) {
	for {
		if v, ok := try(); ok {
			return v, true
		}
		if !awaitItems() {
			var zero V
			return zero, false
		}
	}
}

// awaitItems is a consumer's wait, an SPSC's and a FanIn's: until
// hasItems (true), or closed and still empty after it (false: a
// producer's last publish happens before its Close), stepping idle and
// parking on p.
func awaitItems(idle Idle, p *parker, closed *atomic.Bool, hasItems func() bool) bool {
	for i := 0; ; i++ {
		if hasItems() {
			return true
		}
		if closed.Load() {
			return hasItems()
		}
		if idle.step(i) {
			p.sleep(func() bool { return closed.Load() || hasItems() })
		}
	}
}

// waitUntil is wait that also returns, false, when wake fires first. It
// then withdraws the prepare like cancel, taking the token a waker that
// already won the flag sends, so ch stays empty for the next park.
func (p *parker) waitUntil(wake <-chan time.Time) bool {
	select {
	case <-p.ch:
		return true
	case <-wake:
		p.cancel()
		return false
	}
}

// wake wakes the sleeper if it is parked. The common case, nobody parked, is
// one plain load of a line the sleeper seldom writes.
func (p *parker) wake() {
	if p.flag.Load() != 0 {
		p.wakeSlow()
	}
}

//go:noinline
func (p *parker) wakeSlow() {
	if p.flag.Swap(0) != 0 {
		p.ch <- struct{}{}
	}
}
