package ring

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/internal/layout"
)

// FanIn is one consumer draining one SPSC ring per producer.
//
// Each pass visits every ring once, in round-robin order, and takes at most
// batch elements from each, so a producer that never stops cannot delay
// another's elements by more than one pass. The next pass starts at the ring
// after the last one this pass visited. When every ring is empty the
// consumer parks on one parker that all the rings share; a producer checks
// its flag after each publish and wakes the consumer only when it is set.
//
// Producer i uses the producer methods of Producer(i) and nothing else. One
// goroutine at a time calls the consumer methods of the FanIn (tryPop, Pop,
// popBatch, PopBatchWait, Drain, DrainWait); it must not call consumer
// methods on the rings themselves.
type FanIn[T any] struct {
	// Line 0: consumer's. rings, batch and idle are immutable after
	// NewFanIn; next is written by the consumer only.
	rings []*SPSC[T]
	batch int
	idle  Idle
	next  int // ring the next pass starts at
	_     [layout.CacheLine - 24 - 8 - 16 - 8]byte

	// Line 1: read by every producer after each publish, written when the
	// consumer parks, on Close, or by Interrupt.
	park      parker
	closed    atomic.Bool
	interrupt atomic.Bool
	_         [layout.CacheLine - 16 - 4 - 4]byte
}

// NewFanIn returns a FanIn over producers rings of capacity elements each
// (a power of two, as for New), taking at most batch elements from a ring per
// pass, and waiting with idle (DefaultIdle unless the caller tunes it) in
// the consumer and in every producer's blocking calls. It panics if
// producers or batch is below 1.
func NewFanIn[T any](producers, capacity, batch int, idle Idle) *FanIn[T] {
	if producers < 1 {
		panic(fmt.Sprintf("ring: FanIn needs at least one producer, got %d", producers))
	}
	if batch < 1 {
		panic(fmt.Sprintf("ring: FanIn batch %d is below 1", batch))
	}
	f := &FanIn[T]{
		rings: make([]*SPSC[T], producers),
		batch: batch,
		idle:  idle.normalized(),
	}
	f.park.init()
	for i := range f.rings {
		r := newRing[T](capacity, idle)
		r.cons = &f.park
		f.rings[i] = r
	}
	return f
}

// Producers returns the number of rings.
func (f *FanIn[T]) Producers() int { return len(f.rings) }

// Producer returns the ring that producer i pushes into.
func (f *FanIn[T]) Producer(i int) *SPSC[T] { return f.rings[i] }

// Close closes every ring, so the producers' blocking calls return false,
// and makes the consumer's blocking calls return false or 0 once all rings
// are empty. It is safe from any goroutine and may be called more than once.
func (f *FanIn[T]) Close() {
	for _, r := range f.rings {
		r.Close() // sealed before closed is set: see Closed
	}
	f.closed.Store(true)
	f.park.wake()
}

// tryPop removes and returns the oldest element of the first non-empty ring
// at or after the round-robin position, which then moves past that ring.
func (f *FanIn[T]) tryPop() (v T, ok bool) {
	n := len(f.rings)
	i := f.next
	for range n {
		r := f.rings[i]
		if i++; i == n {
			i = 0
		}
		if v, ok = r.tryPop(); ok {
			f.next = i
			return v, true
		}
	}
	return v, false
}

// Pop is tryPop that waits with the FanIn's idle strategy. It reports false
// once the FanIn is closed and every ring is empty.
func (f *FanIn[T]) Pop() (T, bool) { return await(f.tryPop, f.awaitItems) }

// popBatch makes one pass, moving at most batch elements from each ring into
// dst until dst is full, and returns how many it moved. Each ring's elements
// keep their order; rings are visited round-robin.
func (f *FanIn[T]) popBatch(dst []T) int {
	if len(dst) == 0 {
		return 0
	}
	n := len(f.rings)
	i := f.next
	got := 0
	for range n {
		r := f.rings[i]
		if i++; i == n {
			i = 0
		}
		got += r.popBatch(dst[got:min(got+f.batch, len(dst))])
		if got == len(dst) {
			break
		}
	}
	f.next = i
	return got
}

// PopBatchWait is popBatch that waits with the FanIn's idle strategy until
// it moves at least one element. It returns 0 when dst is empty or the FanIn
// is closed and every ring is empty.
func (f *FanIn[T]) PopBatchWait(dst []T) int {
	for len(dst) > 0 {
		if got := f.popBatch(dst); got > 0 {
			return got
		}
		if !f.awaitItems() {
			break
		}
	}
	return 0
}

// Drain makes one pass without copying: for each ring in round-robin order
// it calls fn with the ring's index and up to batch of its oldest elements,
// in place, then releases them. fn may be called twice for one ring when its
// elements wrap past the end of its buffer, and not at all for an empty one;
// it must not keep items after it returns. Drain returns the number of
// elements passed to fn.
func (f *FanIn[T]) Drain(fn func(producer int, items []T)) int {
	n := len(f.rings)
	i := f.next
	got := 0
	for range n {
		r := f.rings[i]
		for left := f.batch; left > 0; {
			s := r.Peek(left)
			if len(s) == 0 {
				break
			}
			fn(i, s)
			r.Release(len(s))
			got += len(s)
			left -= len(s)
		}
		if i++; i == n {
			i = 0
		}
	}
	f.next = i
	return got
}

// DrainWait is Drain that waits with the FanIn's idle strategy until it
// passes at least one element to fn. It returns 0 once the FanIn is closed
// and every ring is empty.
func (f *FanIn[T]) DrainWait(fn func(producer int, items []T)) int {
	for {
		if got := f.Drain(fn); got > 0 {
			return got
		}
		if !f.awaitItems() {
			return 0
		}
	}
}

// awaitItems waits until some ring has an element (true) or the FanIn is
// closed and every ring is empty (false).
func (f *FanIn[T]) awaitItems() bool { return awaitItems(f.idle, &f.park, &f.closed, f.hasItems) }

func (f *FanIn[T]) hasItems() bool {
	for _, r := range f.rings {
		if r.hasItems() {
			return true
		}
	}
	return false
}

// DrainWaitUntil is DrainWait that also gives up when wake delivers a value
// (a time.Timer's C, say, so a consumer with periodic work — a shard's
// timer wheel — is not parked past its next tick). fired reports that it
// took a value from wake, whether or not it also passed elements to fn: the
// caller then knows its timer needs re-arming. It returns n = 0 when wake
// fired before any element came, or the FanIn is closed and empty.
func (f *FanIn[T]) DrainWaitUntil(fn func(producer int, items []T), wake <-chan time.Time) (n int, fired bool) {
	for {
		if got := f.Drain(fn); got > 0 {
			return got, fired
		}
		items, woke := f.awaitItemsUntil(wake)
		fired = fired || woke
		if !items {
			return 0, fired
		}
	}
}

// Closed reports whether Close was called. Every ring is sealed before
// Closed reports true, so a consumer that sees it and then drains every
// ring to empty has read everything any producer will ever publish.
func (f *FanIn[T]) Closed() bool { return f.closed.Load() }

// Interrupt makes the consumer's DrainWaitUntil, now waiting or the next
// to wait, return (0, false) without waiting further: a way for another
// goroutine to have the consumer look at something else than the rings.
// Safe from any goroutine.
func (f *FanIn[T]) Interrupt() {
	f.interrupt.Store(true)
	f.park.wake()
}

// wakeEvery is how many spins awaitItemsUntil makes between looks at its
// wake channel: a receive from a timer's channel, even one that has not
// fired, takes the timer's lock and reads the clock (go1.23+ timer
// channels are synchronous), tens of nanoseconds against the one or two a
// look at the rings costs; done on every spin, it was 6-25% of the CPU of
// an idle shard executor in profiles. So the spin phase looks at wake on
// its first spin and every wakeEvery-th after it, and the yield phase
// (each step a trip through the scheduler) on every step: a tick that
// fires while the consumer spins is seen at most wakeEvery spins late,
// well under a microsecond with a few rings, and the park that follows
// the spins waits on wake itself.
const wakeEvery = 64

// awaitItemsUntil is awaitItems that also returns when wake fires; fired
// says it took wake's value.
func (f *FanIn[T]) awaitItemsUntil(wake <-chan time.Time) (items, fired bool) {
	for i := 0; ; i++ {
		if f.hasItems() {
			return true, false
		}
		if f.closed.Load() {
			return f.hasItems(), false
		}
		if f.interrupt.Load() && f.interrupt.Swap(false) {
			return f.hasItems(), false
		}
		if i%wakeEvery == 0 || i >= f.idle.Spins {
			select {
			case <-wake:
				return f.hasItems(), true
			default:
			}
		}
		if f.idle.step(i) {
			f.park.prepare()
			if f.closed.Load() || f.interrupt.Load() || f.hasItems() {
				f.park.cancel()
				continue
			}
			if !f.park.waitUntil(wake) {
				return f.hasItems(), true
			}
		}
	}
}
