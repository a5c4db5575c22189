package ring

import (
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/xorack/xorack/internal/invariants"
	"github.com/xorack/xorack/internal/layout"
)

// SPSC is a bounded single-producer single-consumer ring of T.
//
// One goroutine at a time may call the producer methods (tryPush, Push,
// Reserve, ReserveWait, Commit, PushBatch) and one goroutine at a time the
// consumer methods (tryPop, Pop, Peek, peekWait, Release, popBatch); Close,
// Closed, Cap and Len are safe from any goroutine. See the package documentation for the
// layout and the ownership rules. An SPSC must not be copied.
type SPSC[T any] struct {
	// Line 0: immutable after New, read by both sides.
	buf       []T                                          // len(buf) is the capacity, a power of two
	mask      uint64                                       // len(buf) - 1
	idle      Idle                                         // normalized
	cons      *parker                                      // parks the consumer: &consPark, or a FanIn's shared parker
	zeroSlots bool                                         // T holds pointers: clear slots when the consumer lets go
	_         [layout.CacheLine - 24 - 8 - 16 - 8 - 1]byte // the fields above, sized for 64-bit

	// Line 1: the producer's line. tail is written by the producer only
	// (and sealed once by Close) and read atomically by the consumer; the
	// rest is producer-private.
	tail      atomic.Uint64               // count of elements ever published; sealed (bit 63) once closed
	headCache uint64                      // the producer's last view of head
	reserved  int                         // length of the last Reserve span (invariants only)
	_         [layout.CacheLine - 24]byte // three 8-byte fields

	// Line 2: the consumer's line. head is written by the consumer only and
	// read atomically by the producer; the rest is consumer-private.
	head      atomic.Uint64               // count of elements ever released
	tailCache uint64                      // the consumer's last view of tail
	peeked    int                         // length of the last Peek span (invariants only)
	_         [layout.CacheLine - 24]byte // three 8-byte fields

	// Line 3: cold. Written only when a side parks or on Close; read by
	// the other side once per publish or release.
	prodPark parker // parks the producer
	consPark parker // parks the consumer of a standalone ring
	closed   atomic.Bool
	_        [layout.CacheLine - 16 - 16 - 4]byte // two parkers and a 4-byte Bool
}

// New returns an empty ring that holds capacity elements and waits with
// DefaultIdle. capacity must be a power of two (1 is allowed); New panics
// otherwise rather than rounding up, so memory use is what the caller wrote.
func New[T any](capacity int) *SPSC[T] {
	return newWithIdle[T](capacity, DefaultIdle())
}

// newWithIdle is New with the idle strategy of the blocking calls.
func newWithIdle[T any](capacity int, idle Idle) *SPSC[T] {
	r := newRing[T](capacity, idle)
	r.consPark.init()
	r.cons = &r.consPark
	return r
}

func newRing[T any](capacity int, idle Idle) *SPSC[T] {
	if capacity < 1 || bits.OnesCount(uint(capacity)) != 1 {
		panic(fmt.Sprintf("ring: capacity %d is not a power of two", capacity))
	}
	r := &SPSC[T]{
		buf:       make([]T, capacity),
		mask:      uint64(capacity - 1),
		idle:      idle.normalized(),
		zeroSlots: hasPointers[T](),
	}
	r.prodPark.init()
	return r
}

// Cap returns the capacity fixed by New.
func (r *SPSC[T]) Cap() int { return len(r.buf) }

// Len returns the number of published, unreleased elements. It is exact only
// when called by a side whose peer is idle; otherwise it is a snapshot.
func (r *SPSC[T]) Len() int {
	h := r.head.Load()
	return int(r.tail.Load()&^sealed - h)
}

// sealed is the bit Close sets in tail. A publish is a compare-and-swap
// of tail (the same one locked instruction as the store it replaces on
// amd64), so it either lands before the seal, and the consumer sees it,
// or fails and the producer is told: nothing published after Close is
// left unread without a word. Tail counts elements, so bit 63 is never
// reached by counting (2^63 elements).
const sealed = 1 << 63

// Close makes every blocking call on the ring return false, now and later:
// Push, ReserveWait and (once the ring is empty) Pop and peekWait. It wakes a
// parked side. It seals the ring first: tryPush, PushBatch and Commit
// after Close publish nothing and say so (false, 0, false), so what the
// consumer can drain after it sees Closed is final, and every element is
// either read or refused to its producer. The consumer's non-blocking
// calls keep working. Close is safe from any goroutine and may be called
// more than once.
func (r *SPSC[T]) Close() {
	r.tail.Or(sealed)
	r.closed.Store(true)
	r.prodPark.wake()
	r.cons.wake()
}

// ConsumerParked reports whether the consumer is parked (or about to park)
// waiting for items: a push now would wake it. Producers use it to decide
// whether to hand their processor to the consumer after publishing.
func (r *SPSC[T]) ConsumerParked() bool { return r.cons.flag.Load() != 0 }

// Closed reports whether Close has been called.
func (r *SPSC[T]) Closed() bool { return r.closed.Load() }

// ---- Producer side ----

// tryPush appends v and reports true, or reports false when the ring is
// full or closed.
func (r *SPSC[T]) tryPush(v T) bool {
	t := r.tail.Load()
	if t-r.headCache > r.mask { // also when sealed: t has bit 63
		r.headCache = r.head.Load()
		if t-r.headCache > r.mask {
			return false
		}
	}
	r.buf[t&r.mask] = v
	if !r.tail.CompareAndSwap(t, t+1) {
		return false // sealed by Close since the load
	}
	r.cons.wake()
	return true
}

// Push appends v, waiting for room with the ring's idle strategy. It reports
// false, without appending, once the ring is closed.
func (r *SPSC[T]) Push(v T) bool {
	for !r.closed.Load() {
		if r.tryPush(v) {
			return true
		}
		if !r.awaitSpace() {
			return false
		}
	}
	return false
}

// Reserve returns the next free slots, at most n of them and all contiguous
// in the ring's buffer, for the producer to fill in place. The span is
// shorter than n when the ring is nearly full or the free slots wrap past the
// end of the buffer (call Reserve again after Commit for the rest), and empty
// when the ring is full or n < 1. Nothing is visible to the consumer until
// Commit. Slots hold whatever the consumer last left in them: zero values if
// T holds pointers, stale elements otherwise.
func (r *SPSC[T]) Reserve(n int) []T {
	t := r.tail.Load()
	if t&sealed != 0 {
		return r.buf[:0:0]
	}
	size := uint64(len(r.buf))
	want := uint64(max(n, 0))
	free := size - (t - r.headCache)
	if free < want {
		r.headCache = r.head.Load()
		free = size - (t - r.headCache)
	}
	start := t & r.mask
	k := min(want, free, size-start)
	if invariants.Enabled {
		r.checkIndices(t, r.headCache)
		r.reserved = int(k)
	}
	return r.buf[start : start+k : start+k]
}

// ReserveWait is Reserve that waits, with the ring's idle strategy, until at
// least one slot is free. It returns an empty span when n < 1 or the ring is
// closed.
func (r *SPSC[T]) ReserveWait(n int) []T {
	for n > 0 && !r.closed.Load() {
		if s := r.Reserve(n); len(s) > 0 {
			return s
		}
		if !r.awaitSpace() {
			break
		}
	}
	return r.buf[:0:0]
}

// Commit publishes the first k slots of the span the last Reserve returned,
// with one atomic compare-and-swap, and hands them to the consumer. It
// reports false when the ring was closed first: then none of the k is
// published, and the consumer never sees them. The span must not be used
// after Commit; call Reserve again. Committing more than was reserved is a
// programmer error, checked only in builds with the invariants tag.
func (r *SPSC[T]) Commit(k int) bool {
	if invariants.Enabled {
		if k < 0 || k > r.reserved {
			panic(fmt.Sprintf("ring: Commit(%d) after Reserve of %d", k, r.reserved))
		}
		r.reserved = 0
	}
	if k <= 0 {
		return true
	}
	t := r.tail.Load()
	if t&sealed != 0 || !r.tail.CompareAndSwap(t, t+uint64(k)) {
		return false // the producer is the only other writer: a failed swap is the seal
	}
	r.cons.wake()
	return true
}

// PushBatch appends a prefix of src, as much as fits, with one atomic
// compare-and-swap, and returns its length: 0 once the ring is closed.
func (r *SPSC[T]) PushBatch(src []T) int {
	t := r.tail.Load()
	if t&sealed != 0 {
		return 0
	}
	size := uint64(len(r.buf))
	free := size - (t - r.headCache)
	if free < uint64(len(src)) {
		r.headCache = r.head.Load()
		free = size - (t - r.headCache)
	}
	n := min(free, uint64(len(src)))
	if n == 0 {
		return 0
	}
	start := t & r.mask
	c := copy(r.buf[start:], src[:n])
	copy(r.buf, src[c:n])
	if !r.tail.CompareAndSwap(t, t+n) {
		return 0 // sealed by Close since the load
	}
	r.cons.wake()
	return int(n)
}

// awaitSpace waits until the ring has a free slot (true) or is closed
// (false).
func (r *SPSC[T]) awaitSpace() bool {
	for i := 0; ; i++ {
		if r.closed.Load() {
			return false
		}
		if r.hasSpace() {
			return true
		}
		if r.idle.step(i) {
			r.prodPark.sleep(func() bool { return r.closed.Load() || r.hasSpace() })
		}
	}
}

func (r *SPSC[T]) hasSpace() bool {
	r.headCache = r.head.Load()
	return r.tail.Load()-r.headCache <= r.mask // false once sealed
}

// ---- Consumer side ----

// tryPop removes and returns the oldest element, or reports false when the
// ring is empty.
func (r *SPSC[T]) tryPop() (v T, ok bool) {
	h := r.head.Load()
	if h == r.tailCache {
		r.tailCache = r.tail.Load() &^ sealed
		if h == r.tailCache {
			return v, false
		}
	}
	i := h & r.mask
	v = r.buf[i]
	if r.zeroSlots {
		var zero T
		r.buf[i] = zero
	}
	r.head.Store(h + 1)
	r.prodPark.wake()
	return v, true
}

// Pop removes and returns the oldest element, waiting for one with the
// ring's idle strategy. It reports false once the ring is closed and empty.
func (r *SPSC[T]) Pop() (T, bool) { return await(r.tryPop, r.awaitItems) }

// Peek returns the oldest published elements, at most n of them and all
// contiguous in the ring's buffer, for the consumer to read in place. The
// span is shorter than n when fewer are published or they wrap past the end
// of the buffer (call Peek again after Release for the rest), and empty when
// the ring is empty or n < 1. The elements stay in the ring until Release.
func (r *SPSC[T]) Peek(n int) []T {
	h := r.head.Load()
	want := uint64(max(n, 0))
	avail := r.tailCache - h
	if avail < want {
		r.tailCache = r.tail.Load() &^ sealed
		avail = r.tailCache - h
	}
	start := h & r.mask
	k := min(want, avail, uint64(len(r.buf))-start)
	if invariants.Enabled {
		r.checkIndices(r.tailCache, h)
		r.peeked = int(k)
	}
	return r.buf[start : start+k : start+k]
}

// peekWait is Peek that waits, with the ring's idle strategy, until at least
// one element is published. It returns an empty span when n < 1 or the ring
// is closed and empty.
func (r *SPSC[T]) peekWait(n int) []T {
	for n > 0 {
		if s := r.Peek(n); len(s) > 0 {
			return s
		}
		if !r.awaitItems() {
			break
		}
	}
	return r.buf[:0:0]
}

// Release hands the first k elements of the span the last Peek returned back
// to the producer, with one atomic store of head. The span must not be used after
// Release; call Peek again. Releasing more than was peeked is a programmer
// error, checked only in builds with the invariants tag.
func (r *SPSC[T]) Release(k int) {
	if invariants.Enabled {
		if k < 0 || k > r.peeked {
			panic(fmt.Sprintf("ring: Release(%d) after Peek of %d", k, r.peeked))
		}
		r.peeked = 0
	}
	if k <= 0 {
		return
	}
	h := r.head.Load()
	if r.zeroSlots {
		start := h & r.mask
		clear(r.buf[start : start+uint64(k)])
	}
	r.head.Store(h + uint64(k))
	r.prodPark.wake()
}

// popBatch moves the oldest elements into dst, as many as are published and
// fit, releases them with one atomic store, and returns how many it moved.
func (r *SPSC[T]) popBatch(dst []T) int {
	h := r.head.Load()
	avail := r.tailCache - h
	if avail < uint64(len(dst)) {
		r.tailCache = r.tail.Load() &^ sealed
		avail = r.tailCache - h
	}
	n := min(avail, uint64(len(dst)))
	if n == 0 {
		return 0
	}
	start := h & r.mask
	first := r.buf[start:min(start+n, uint64(len(r.buf)))]
	second := r.buf[:n-uint64(len(first))]
	copy(dst, first)
	copy(dst[len(first):], second)
	if r.zeroSlots {
		clear(first)
		clear(second)
	}
	r.head.Store(h + n)
	r.prodPark.wake()
	return int(n)
}

// awaitItems waits until the ring has an element (true) or is closed and
// empty (false).
func (r *SPSC[T]) awaitItems() bool { return awaitItems(r.idle, r.cons, &r.closed, r.hasItems) }

func (r *SPSC[T]) hasItems() bool {
	r.tailCache = r.tail.Load() &^ sealed
	return r.tailCache != r.head.Load()
}

// checkIndices panics if a tail and head seen by one side cannot both be
// right. Built only with the invariants tag.
func (r *SPSC[T]) checkIndices(tail, head uint64) {
	if tail-head > uint64(len(r.buf)) {
		panic(fmt.Sprintf("ring: tail %d and head %d are more than capacity %d apart",
			tail, head, len(r.buf)))
	}
}
