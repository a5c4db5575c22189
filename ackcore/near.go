package ackcore

import (
	"fmt"

	"github.com/xorack/xorack/internal/timerwheel"
)

// Timeouts in two tiers, expired in bounded slices.
//
// Every entry carries its deadline. Most roots complete long before it (a
// 30 s timeout against millisecond trees), so keeping a timer-wheel node
// per entry, linking it on INIT and unlinking it on completion, costs two
// or three random cache misses per root for timers that never fire. Instead
// only entries whose deadline is near are found ahead of time:
//
//   - limit is a tick ahead of now. Every entry whose deadline is before
//     limit is known to be due: it has a timer in the near wheel, or its
//     root is on the due list of its deadline tick. The others ("far"
//     entries) just store the deadline.
//   - An entry created, reset or re-armed with a deadline before limit gets
//     a near-wheel timer at once (flagNear; the low meta word is its
//     handle, the wheel holds the deadline, nearRoots its root). Only
//     short per-root timeouts (under a window or two) do.
//   - limit moves forward by one window at a time. Before it does, a pass
//     over the table puts the root of each far entry whose deadline falls
//     in the next window [horizon, limit) on that tick's due list, and
//     expires at once any it finds already due. The pass starts a window
//     before the old limit and is paced over half a window of Expire
//     calls. While it runs, new deadlines are compared with the new limit.
//     Entries never move (table.go), so the pass sees each entry once.
//   - Due lists are per-tick buckets of root ids in 512-byte chunks, over a
//     ring that spans the next two windows. They are never unlinked from:
//     when a tick comes, each root on its list is looked up, and expired
//     if it is still far and due (a root that completed, or that a RESET
//     moved on, is simply skipped). So a root costs 8 bytes there and no
//     work when it completes, and a wave of a million roots due together
//     costs 8 MB of chunks, freed as the wave is expired: nothing grows
//     in place, nothing is copied.
//   - Timers and due lists are keyed by root, not slot.
//
// Each Expire call does a bounded slice of this work: it reads at most
// expireScanLimit slots (the pass) and due-list buckets, examines at most
// expireEntryLimit entries by timer or due list, and writes at most
// cap(out)-len(out) outcomes; when it stops early it says more. A pass
// that falls behind (a pause, a clock jump, Expire called too rarely)
// catches up in further calls, expiring what it finds due as it goes. The
// window is slots/passSlotsPerTick ticks (at least minWindow, at most a
// quarter of the default timeout), so that a pass reads about
// 2*passSlotsPerTick slots per tick.
type nearTimers struct {
	near      *timerwheel.Wheel // handle -> deadline
	nearRoots []uint64          // handle -> root, 0 when free
	nearFree  []uint32          // free handles, a stack

	due dueLists

	window    uint64 // ticks limit moves per pass
	horizon   uint64 // the limit before the running pass (== limit when none runs)
	limit     uint64 // deadlines before limit are near (see above)
	passStart uint64 // tick the running pass began
	scan      int    // next slot the running pass reads; -1 when none runs

	// What the last Expire call did (tests check the limits with it).
	call expireWork
}

// expireWork is what one Expire call did.
type expireWork struct {
	Slots    int // table slots and due-list buckets read
	Entries  int // entries examined through a near timer or a due list
	Outcomes int // outcomes written
}

const (
	// expireScanLimit is the most table slots (and due-list buckets) one
	// Expire call reads: 384 KiB of slots, read in order (tens of
	// microseconds even from memory).
	expireScanLimit = 1 << 14
	// expireEntryLimit is the most entries one Expire call looks up
	// through near timers and due lists, expired or skipped: each is a
	// random table access (a cache miss in a large table), so 1024 of
	// them take a fraction of a millisecond.
	expireEntryLimit = 1 << 10

	// nearInitial is the near wheel's first (and idle) capacity; it
	// doubles on demand up to MaxPending+failReserve and goes back to
	// nearInitial when it empties.
	nearInitial = 64
	// passSlotsPerTick sets the window: a pass over the table takes
	// slots/passSlotsPerTick ticks at least, reading 2*passSlotsPerTick
	// slots per tick over half the window (a million pending roots, 1.33
	// million slots: read in 0.67 s every 1.3 s at a 1 ms tick, about 50
	// MB/s, some 10 to 20 µs per tick). The window also sets which
	// per-root timeouts need a near timer from the start: those under
	// one to two windows. 1024 keeps both small: at a million pending
	// roots with timeouts uniform in 1-60 s, about 2% of them.
	passSlotsPerTick = 1024
	// minWindow is the shortest window, so that small tables are not read
	// every tick.
	minWindow = 64
)

func (s *Shard) initNear() {
	w := min(max((uint64(s.t.slots())+passSlotsPerTick-1)/passSlotsPerTick, minWindow), max(s.defTicks/4, 1))
	s.nearTimers = nearTimers{
		window:  w,
		horizon: s.nowTick + w,
		limit:   s.nowTick + w,
		scan:    -1,
	}
	// The near wheel is made by the first near timer (growNear), and the
	// due lists' buckets by the first root listed: a shard whose roots all
	// complete or time out far holds neither (10 KB at 10,000 roots
	// pending, a root's byte).
	//
	// Listed deadlines lie in [cursor, limit), and limit is at most two
	// windows past now (a pass starts a window before the old limit and
	// sets the new one a window past it), with cursor at now+1.
	s.due.init(2*w+2, s.nowTick+1)
}

// resetNearWheel makes the near wheel empty at its idle capacity.
func (s *Shard) resetNearWheel() {
	s.near = timerwheel.New(nearInitial, s.nowTick)
	s.nearRoots = make([]uint64, nearInitial)
	s.nearFree = make([]uint32, 0, nearInitial)
	for h := nearInitial - 1; h >= 0; h-- {
		s.nearFree = append(s.nearFree, uint32(h))
	}
}

// nearBytes is the memory of the near tier: the near wheel with its root
// records and free stack, and the due lists.
func (s *Shard) nearBytes() int {
	n := cap(s.nearRoots)*8 + cap(s.nearFree)*4 + s.due.bytes()
	if s.near != nil {
		n += s.near.Bytes()
	}
	return n
}

// nearLen is the number of near timers.
func (s *Shard) nearLen() int {
	if s.near == nil {
		return 0
	}
	return s.near.Len()
}

// setDeadline (re)arms e's timeout at tick d, giving it a near timer when
// d is before limit and taking its near timer away when not.
func (s *Shard) setDeadline(e *entry, d uint64) {
	w := uint32(e.word())
	if w&flagNear != 0 {
		h := uint32(e.meta)
		if d < s.limit {
			s.near.Reschedule(h, s.reachable(d))
			return
		}
		s.freeNear(h)
		w &^= flagNear
	} else if d < s.limit {
		e.meta = uint64(w|flagNear)<<32 | uint64(s.allocNear(e.key, d))
		return
	}
	e.meta = uint64(w)<<32 | uint64(uint32(d))
}

// reachable clamps d to the near wheel's reach. Only a wheel whose time
// lags by days (Expire not called) needs it.
func (s *Shard) reachable(d uint64) uint64 {
	return min(d, s.near.Now()+timerwheel.MaxDelay)
}

// allocNear schedules a near timer for root at d and returns its handle.
func (s *Shard) allocNear(root, d uint64) uint32 {
	if len(s.nearFree) == 0 {
		s.growNear()
	}
	h := s.nearFree[len(s.nearFree)-1]
	s.nearFree = s.nearFree[:len(s.nearFree)-1]
	s.nearRoots[h] = root
	s.near.Schedule(h, s.reachable(d))
	return h
}

// freeNear cancels near timer h and frees its handle.
func (s *Shard) freeNear(h uint32) {
	s.near.Cancel(h)
	s.releaseNear(h)
}

// releaseNear frees the handle of a timer no longer scheduled.
func (s *Shard) releaseNear(h uint32) {
	s.nearRoots[h] = 0
	s.nearFree = append(s.nearFree, h)
}

// growNear makes the near wheel at its idle capacity when there is none,
// or doubles it, moving its live timers over. Handles never exceed the
// number of entries, so it stops at MaxPending plus the FAIL reserve.
// Apply makes and grows it (a near timer at creation or RESET), and so
// does Expire when it re-arms a root that progressed (ProgressTimeout);
// the pass never does.
func (s *Shard) growNear() {
	old := s.near
	if old == nil {
		s.resetNearWheel()
		return
	}
	n := min(2*old.Capacity(), max(s.maxPending+s.failReserve, nearInitial))
	if n <= old.Capacity() {
		panic(fmt.Sprintf("ackcore: near wheel full at %d timers for %d entries", old.Capacity(), s.t.count))
	}
	w := timerwheel.New(n, old.Now())
	for h, root := range s.nearRoots {
		if root != 0 {
			d, _ := old.Deadline(uint32(h))
			w.Schedule(uint32(h), d)
		}
	}
	roots := make([]uint64, n)
	copy(roots, s.nearRoots)
	free := make([]uint32, 0, n)
	free = append(free, s.nearFree...)
	for h := n - 1; h >= old.Capacity(); h-- {
		free = append(free, uint32(h))
	}
	s.near, s.nearRoots, s.nearFree = w, roots, free
}

// dueLists are per-tick lists of roots (see nearTimers), over a ring of
// span buckets for the ticks [cursor, cursor+span).
type dueLists struct {
	buckets []dueBucket // span of them, made by the first add
	span    uint64      // a power of two
	cursor  uint64      // the first tick whose bucket is not yet taken
	records int         // roots listed and not yet taken
	chunks  int         // chunks held, in lists and in the pool
	pool    []*dueChunk // free chunks, at most dueReserve
}

type dueBucket struct{ first, last *dueChunk }

// dueChunk holds up to dueChunkLen roots: 512 bytes.
type dueChunk struct {
	roots      [dueChunkLen]uint64
	head, tail int32 // roots[head:tail] are listed
	next       *dueChunk
}

const (
	dueChunkLen = 62
	// dueReserve is the most free chunks kept for reuse while the lists
	// hold anything; once they are empty none are kept.
	dueReserve = 8
)

func (d *dueLists) init(span, cursor uint64) {
	n := 1
	for uint64(n) < span {
		n <<= 1
	}
	*d = dueLists{span: uint64(n), cursor: cursor}
}

// add lists root for tick t, unless t is outside the ring's span.
func (d *dueLists) add(root, t uint64) bool {
	if t < d.cursor || t-d.cursor >= d.span {
		return false
	}
	if d.buckets == nil {
		d.buckets = make([]dueBucket, d.span)
	}
	b := &d.buckets[t&(d.span-1)]
	c := b.last
	if c == nil || c.tail == dueChunkLen {
		if n := len(d.pool); n > 0 {
			c, d.pool = d.pool[n-1], d.pool[:n-1]
		} else {
			c = new(dueChunk)
			d.chunks++
		}
		if b.last == nil {
			b.first = c
		} else {
			b.last.next = c
		}
		b.last = c
	}
	c.roots[c.tail] = root
	c.tail++
	d.records++
	return true
}

// take removes and returns a root listed for tick t.
func (d *dueLists) take(t uint64) (uint64, bool) {
	if d.records == 0 {
		return 0, false // nothing listed (and perhaps no buckets yet)
	}
	b := &d.buckets[t&(d.span-1)]
	c := b.first
	if c == nil {
		return 0, false
	}
	root := c.roots[c.head]
	if c.head++; c.head == c.tail {
		if b.first = c.next; b.first == nil {
			b.last = nil
		}
		*c = dueChunk{}
		if len(d.pool) < dueReserve {
			d.pool = append(d.pool, c)
		} else {
			d.chunks-- // released to the garbage collector
		}
	}
	if d.records--; d.records == 0 {
		// Empty: release the spare chunks too, so that after a wave the
		// lists are back to their idle size.
		d.chunks -= len(d.pool)
		d.pool = nil
	}
	return root, true
}

// bytes is the memory the due lists hold.
func (d *dueLists) bytes() int {
	return len(d.buckets)*16 + d.chunks*512 + cap(d.pool)*8
}

// each calls f for every listed root and its tick (verify).
func (d *dueLists) each(f func(root, tick uint64)) {
	for i := range uint64(len(d.buckets)) {
		t := d.cursor + (i-d.cursor)&uint64(len(d.buckets)-1)
		for c := d.buckets[i].first; c != nil; c = c.next {
			for _, r := range c.roots[c.head:c.tail] {
				f(r, t)
			}
		}
	}
}
