package timerwheel

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/xorack/xorack/internal/invariants"
)

// Handle is a timer's identity: an index in [0, Capacity()) chosen by the
// caller. The wheel keeps one node per handle; the caller typically uses the
// index of the object the timer belongs to.
type Handle = uint32

// Tick is time in ticks. The caller converts from wall time (at a 1 ms tick,
// 24 h is 86 400 000 ticks). Ticks must stay below 2^64 - 2^31: the wheel
// does not wrap the 64-bit counter.
type Tick = uint64

// The geometry. Everything else is derived from these two numbers.
const (
	// slotBits is log2 of the slots per level. 64 slots make a level's
	// occupancy bitmap exactly one uint64, so "next occupied slot" is one
	// mask and one TrailingZeros64.
	slotBits = 6
	// numLevels is the number of levels. 5 levels of 6 bits span 2^30
	// ticks: 12.4 days at a 1 ms tick, more than the 24 h the acker needs,
	// and small enough that a deadline's distance from now fits an int32
	// (see MaxDelay).
	numLevels = 5

	slotsPerLevel = 1 << slotBits       // 64
	slotMask      = slotsPerLevel - 1   // low slotBits bits
	topLevel      = numLevels - 1       // the ring level (see doc.go)
	topShift      = slotBits * topLevel // 24: a top slot covers 2^24 ticks
	wheelBits     = slotBits * numLevels
	// numBuckets is the number of bucket lists, hence of sentinel nodes
	// stored after the caller's handles: 5 × 64 = 320.
	numBuckets = numLevels * slotsPerLevel
)

// MaxDelay is the farthest deadline ahead of Now that Schedule accepts:
// 2^30 - 1 ticks, 12.4 days at a 1 ms tick. It is one tick short of the
// wheel's span, so the top level's ring never holds two revolutions in one
// slot, and far below 2^31, so a deadline stored as a wrapping uint32 is
// recovered exactly from its signed distance to Now.
const MaxDelay Tick = 1<<wheelBits - 1

// unlinked is the link value of an unscheduled node. Node indices (handles,
// then sentinels) stay below it.
const unlinked = math.MaxUint32

// MaxCapacity is the largest capacity New accepts: every handle and the
// numBuckets sentinels after them need an index below the reserved unlinked
// value, and the count must fit an int on 32-bit platforms.
const MaxCapacity = min(unlinked-numBuckets, math.MaxInt)

// NodeBytes is the memory the wheel keeps per handle: a uint32 deadline and
// two uint32 links (TestNodeSize checks it). The wheel's total footprint is
// (Capacity()+320)*NodeBytes plus a fixed header.
const NodeBytes = 12

// fullCheckNodes bounds the debug cost per operation under -tags
// invariants: a wheel with at most this many nodes runs the full check after
// every operation; a larger one runs it after every len(nodes)/fullCheckNodes
// operations (and a constant-time check of the touched nodes after each), so
// a caller's tests with a million handles still finish.
const fullCheckNodes = 1 << 12

// node is one doubly linked list cell. Handles and sentinels share the type
// and the slice, so unlinking never needs to know which list a node is on.
type node struct {
	// deadline is the low 32 bits of the timer's deadline. The full value
	// is now + int32(deadline - uint32(now)): a pending deadline is never
	// more than MaxDelay from now in either direction. Unused in sentinels.
	deadline uint32
	prev     uint32 // previous node in the bucket's circular list, or unlinked
	next     uint32 // next node in the bucket's circular list, or unlinked
}

// Wheel is a hierarchical timer wheel over a fixed set of handles. It is not
// safe for concurrent use; see the package documentation.
type Wheel struct {
	// nodes holds the capacity timer nodes, then numBuckets sentinels.
	nodes []node
	// timers is nodes[:capacity:capacity], the view every handle goes
	// through: an out-of-range handle hits Go's bounds check and can never
	// reach (and corrupt) a sentinel.
	timers []node
	// base is the index of the first sentinel (= capacity).
	base uint32
	// now is the tick the wheel has advanced to; see Now.
	now Tick
	// length is the number of scheduled timers.
	length int
	// occupied has bit s of word l set exactly when bucket (l, s) is
	// non-empty.
	occupied [numLevels]uint64
	// jumps counts the times Expire moved now to a bucket boundary; tests
	// use it to show that an idle gap costs O(levels), not O(ticks).
	jumps uint64
	// debugOps counts operations for the amortized check (invariants only).
	debugOps uint64
}

// New returns an empty wheel for handles [0, capacity) whose time is now.
// It panics if capacity is not in [1, MaxCapacity].
func New(capacity int, now Tick) *Wheel {
	if capacity <= 0 || uint64(capacity) > MaxCapacity {
		panic(fmt.Sprintf("timerwheel: capacity %d out of range [1, %d]", capacity, uint64(MaxCapacity)))
	}
	nodes := make([]node, capacity+numBuckets)
	for i := range capacity {
		nodes[i] = node{prev: unlinked, next: unlinked}
	}
	for i := capacity; i < len(nodes); i++ {
		nodes[i] = node{prev: uint32(i), next: uint32(i)}
	}
	return &Wheel{
		nodes:  nodes,
		timers: nodes[:capacity:capacity],
		base:   uint32(capacity),
		now:    now,
	}
}

// Capacity returns the number of handles, fixed at New.
func (w *Wheel) Capacity() int { return len(w.timers) }

// Bytes is the memory the wheel's nodes hold: (Capacity()+320)*NodeBytes.
func (w *Wheel) Bytes() int { return len(w.nodes) * NodeBytes }

// Now returns the tick the wheel has advanced to: the deadline of the timer
// Expire last returned, or the argument of the last Expire that found
// nothing due, whichever came later; initially the tick given to New. It
// never decreases.
func (w *Wheel) Now() Tick { return w.now }

// Len returns the number of scheduled timers.
func (w *Wheel) Len() int { return w.length }

// Scheduled reports whether h has a pending timer.
func (w *Wheel) Scheduled(h Handle) bool {
	if invariants.Enabled {
		w.checkHandle("Scheduled", h)
	}
	return w.timers[h].next != unlinked
}

// Deadline returns h's deadline as given to Schedule, Reschedule (or
// carried by Move), and whether h is scheduled. A deadline more than
// MaxDelay before Now at the time it was scheduled is recorded, and
// reported, as Now-MaxDelay; it is due at once either way.
func (w *Wheel) Deadline(h Handle) (Tick, bool) {
	if invariants.Enabled {
		w.checkHandle("Deadline", h)
	}
	n := &w.timers[h]
	if n.next == unlinked {
		return 0, false
	}
	return w.full(n.deadline), true
}

// Schedule starts a timer for h, which must be unscheduled, due at
// deadline. It returns false, and schedules nothing, if deadline is more than
// MaxDelay after Now. A deadline at or before Now is due at the next Expire;
// it is ordered as if its deadline were Now, after the timers already due
// at Now (see Expire). In release builds, Schedule of a scheduled handle
// acts as Reschedule; with -tags invariants it panics.
func (w *Wheel) Schedule(h Handle, deadline Tick) bool {
	if invariants.Enabled {
		w.checkHandle("Schedule", h)
		if w.timers[h].next != unlinked {
			panic(fmt.Sprintf("timerwheel: Schedule of handle %d, which is already scheduled (use Reschedule)", h))
		}
	}
	return w.Reschedule(h, deadline)
}

// Reschedule is Schedule for a handle that may already be scheduled: its
// timer is moved to deadline and counts as scheduled now for FIFO order
// among equal deadlines. If deadline is more than MaxDelay after Now it
// returns false and leaves h as it was.
func (w *Wheel) Reschedule(h Handle, deadline Tick) bool {
	if invariants.Enabled {
		w.checkHandle("Reschedule", h)
	}
	n := &w.timers[h]
	if deadline > w.now && deadline-w.now > MaxDelay {
		return false
	}
	if n.next != unlinked {
		w.unlink(h)
	}
	if deadline < w.now && w.now-deadline > MaxDelay {
		deadline = w.now - MaxDelay // keep the stored distance within int32
	}
	n.deadline = uint32(deadline)
	w.link(h, w.bucketOf(max(deadline, w.now)))
	if invariants.Enabled {
		w.afterOp(h, h)
	}
	return true
}

// Cancel stops h's timer. It returns false if h was not scheduled.
func (w *Wheel) Cancel(h Handle) bool {
	if invariants.Enabled {
		w.checkHandle("Cancel", h)
	}
	if w.timers[h].next == unlinked {
		return false
	}
	w.unlink(h)
	if invariants.Enabled {
		w.afterOp(h, h)
	}
	return true
}

// Move relocates from's timer to to: afterwards to has from's deadline and
// from's place in expiry order, and from is unscheduled. If from is
// unscheduled (or from == to) nothing happens. to must be unscheduled; with
// -tags invariants Move panics otherwise, in release builds to's own timer
// is cancelled first. Callers use Move when the object a handle names moves
// to another index, as in an open-addressed table that shifts entries back
// on delete.
func (w *Wheel) Move(from, to Handle) {
	if invariants.Enabled {
		w.checkHandle("Move", from)
		w.checkHandle("Move", to)
		if from != to && w.timers[from].next != unlinked && w.timers[to].next != unlinked {
			panic(fmt.Sprintf("timerwheel: Move from handle %d onto handle %d, which is scheduled", from, to))
		}
	}
	f, t := &w.timers[from], &w.timers[to]
	if from == to || f.next == unlinked {
		return
	}
	if t.next != unlinked {
		w.unlink(to)
	}
	*t = *f
	w.nodes[t.prev].next = to
	w.nodes[t.next].prev = to
	f.prev, f.next = unlinked, unlinked
	if invariants.Enabled {
		w.afterOp(from, to)
	}
}

// Expire returns the next due timer, already unscheduled, or false when
// none is due at now. A timer is due when its deadline is at or before now
// (or before Now: the wheel's time never runs backwards, so a now below
// Now() counts as Now()).
//
// Successive calls return timers in ascending order of deadline, equal
// deadlines in the order they were scheduled (FIFO; Reschedule counts as
// scheduling again, Move keeps the place). A deadline that was already
// before Now when it was scheduled counts as Now for this order: it joins
// the timers due at Now, after those scheduled earlier.
//
// Expire moves Now forward only as far as it must: to the deadline of the
// timer it returns (unless that was already behind Now), or to now when
// nothing is due. It does not step through
// idle ticks: each step jumps to the next non-empty bucket's boundary found
// in the occupancy bitmaps, so a call costs O(levels) per jump, and a timer
// is cascaded at most numLevels-1 times per schedule. Between calls the
// caller may Schedule, Reschedule, Cancel or Move anything.
func (w *Wheel) Expire(now Tick) (Handle, bool) {
	nodes := w.nodes
	for {
		s := w.base + uint32(w.now&slotMask) // level 0, the current tick
		if h := nodes[s].next; h != s {
			w.unlink(h)
			if invariants.Enabled {
				w.afterOp(h, h)
			}
			return h, true
		}
		if now <= w.now {
			return 0, false
		}
		next, ok := w.nextEvent()
		if !ok || next > now {
			w.now = now
			if invariants.Enabled {
				w.afterOp(0, 0)
			}
			return 0, false
		}
		w.now = next
		w.jumps++
		w.cascade()
	}
}

// ExpireDeadline is Expire that also returns the timer's deadline (as
// Deadline would have reported it).
func (w *Wheel) ExpireDeadline(now Tick) (Handle, Tick, bool) {
	h, ok := w.Expire(now)
	if !ok {
		return 0, 0, false
	}
	return h, w.full(w.timers[h].deadline), true
}

// Advance calls fire for every timer due at now, in Expire order, and
// returns how many fired. fire may schedule, cancel or move timers; a timer
// it schedules at or before now fires in the same call.
func (w *Wheel) Advance(now Tick, fire func(Handle)) int {
	n := 0
	for {
		h, ok := w.Expire(now)
		if !ok {
			return n
		}
		fire(h)
		n++
	}
}

// full recovers a pending timer's 64-bit deadline from its low 32 bits.
func (w *Wheel) full(d uint32) Tick {
	return w.now + Tick(int64(int32(d-uint32(w.now))))
}

// bucketOf returns the bucket for deadline d >= now: the level is the
// highest 6-bit group in which d and now differ (capped at the top level),
// the slot is d's digit at that level. All timers with one deadline are
// therefore always in one bucket, which is what keeps FIFO order exact
// across cascades.
func (w *Wheel) bucketOf(d Tick) uint32 {
	level := min(uint(bits.Len64((d^w.now)|1)-1)/slotBits, topLevel)
	return uint32(level<<slotBits | uint(d>>(level*slotBits))&slotMask)
}

// link appends node h at the tail of bucket b and counts it.
func (w *Wheel) link(h Handle, b uint32) {
	nodes := w.nodes
	s := w.base + b
	tail := nodes[s].prev
	nodes[h].prev = tail
	nodes[h].next = s
	nodes[tail].next = h
	nodes[s].prev = h
	w.occupied[b>>slotBits] |= 1 << (b & slotMask)
	w.length++
}

// unlink removes scheduled node h from its list and uncounts it. When h was
// the last timer of its bucket, its neighbours on both sides are the
// bucket's sentinel, whose index names the bucket to clear in the bitmap.
func (w *Wheel) unlink(h Handle) {
	nodes := w.nodes
	p, x := nodes[h].prev, nodes[h].next
	nodes[p].next = x
	nodes[x].prev = p
	if p == x {
		b := p - w.base
		w.occupied[b>>slotBits] &^= 1 << (b & slotMask)
	}
	nodes[h].prev, nodes[h].next = unlinked, unlinked
	w.length--
}

// nextEvent returns the first tick after now at which a non-empty bucket
// begins: a level-0 slot (timers due there) or a higher slot (to cascade).
// Occupied slots below the top level always lie ahead of now's digit at
// their level, so the earliest one is the lowest set bit above that digit,
// and a lower level's event comes before any higher level's. The top level
// is a ring: a slot at or behind now's digit belongs to the next revolution.
func (w *Wheel) nextEvent() (Tick, bool) {
	now := w.now
	for level := range uint(topLevel) {
		shift := level * slotBits
		digit := (now >> shift) & slotMask
		if m := w.occupied[level] & (^uint64(1) << digit); m != 0 {
			span := uint64(1)<<(shift+slotBits) - 1
			return now&^span | uint64(bits.TrailingZeros64(m))<<shift, true
		}
	}
	m := w.occupied[topLevel]
	if m == 0 {
		return 0, false
	}
	digit := int((now >> topShift) & slotMask)
	ahead := bits.TrailingZeros64(bits.RotateLeft64(m, -(digit+1))) + 1 // slots ahead, 1..64
	return now&^(1<<topShift-1) + uint64(ahead)<<topShift, true
}

// cascade redistributes the buckets that begin at now, highest level first,
// into lower levels, keeping each bucket's order. Only levels whose boundary
// now is (its low digits are all zero) can begin here.
func (w *Wheel) cascade() {
	nodes := w.nodes
	top := min(uint(bits.TrailingZeros64(w.now))/slotBits, topLevel)
	for level := top; level >= 1; level-- {
		slot := uint32(w.now>>(level*slotBits)) & slotMask
		if w.occupied[level]&(1<<slot) == 0 {
			continue
		}
		s := w.base + (uint32(level)<<slotBits | slot)
		x := nodes[s].next
		nodes[s].next, nodes[s].prev = s, s
		w.occupied[level] &^= 1 << slot
		for x != s {
			nx := nodes[x].next
			w.length-- // link counts it again
			w.link(x, w.bucketOf(w.full(nodes[x].deadline)))
			x = nx
		}
	}
}
