package ackcore

import (
	"fmt"

	"github.com/xorack/xorack/timerwheel"
)

// Timeouts in two tiers.
//
// Every entry carries its deadline. Most roots complete long before it (a
// 30 s timeout against millisecond trees), so keeping a timer-wheel node
// per entry, linking it on INIT and unlinking it on completion, costs two
// or three random cache misses per root for timers that never fire. Instead
// only entries whose deadline is near get a timer:
//
//   - limit is a tick ahead of now. Every entry whose deadline is before
//     limit has a timer in the near wheel (flagNear; the low meta word is
//     its handle, the wheel holds the deadline, a record holds its root).
//     The others ("far" entries) just store the deadline.
//   - An entry created, reset or re-armed with a deadline before limit gets
//     its timer at once (a per-root timeout shorter than the window does).
//   - limit moves forward by one window at a time. Before it does, a pass
//     over the table gives a timer to each far entry whose deadline falls
//     in the next window. The pass is incremental: it starts a window before
//     the old limit, runs over half a window of Expire calls, and finishes
//     at once if time reaches the old limit first. While a pass runs, new
//     deadlines are compared with the new limit; an entry that backward
//     shift moves from the unscanned part behind the pass is checked as it
//     moves (removeSlot).
//   - A near timer that fires finds its root by a table lookup: timers are
//     keyed by root, not slot, so entries move freely on delete.
//
// The window is an eighth of the default timeout, or longer for big tables
// so that a pass reads at most passSlotsPerTick slots per tick. In steady
// traffic the near wheel then holds only the roots about to time out, and
// the per-root cost of timeouts is one 32-bit store at INIT.
type nearTimers struct {
	near      *timerwheel.Wheel // handle -> deadline
	nearRoots []uint64          // handle -> root, 0 when free
	nearFree  []uint32          // free handles, a stack

	window    uint64 // ticks limit moves per pass
	horizon   uint64 // the limit before the running pass (== limit when none runs)
	limit     uint64 // deadlines before limit have near timers (see above)
	passStart uint64 // tick the running pass began
	scan      int    // next slot the running pass reads; -1 when none runs
}

const (
	// nearInitial is the near wheel's first capacity; it doubles on demand
	// up to MaxPending.
	nearInitial = 64
	// passSlotsPerTick bounds the table slots a pass reads per tick: a
	// million-slot table is read once per 4 s at a 1 ms tick, 6 MB/s.
	passSlotsPerTick = 256
)

func (s *Shard) initNear() {
	w := max(s.defTicks/8, uint64(s.t.slots())/passSlotsPerTick, 1)
	s.nearTimers = nearTimers{
		near:      timerwheel.New(nearInitial, s.nowTick),
		nearRoots: make([]uint64, nearInitial),
		nearFree:  make([]uint32, 0, nearInitial),
		window:    w,
		horizon:   s.nowTick + w,
		limit:     s.nowTick + w,
		scan:      -1,
	}
	for h := nearInitial - 1; h >= 0; h-- {
		s.nearFree = append(s.nearFree, uint32(h))
	}
}

// nearBytes is the memory of the near tier.
func (s *Shard) nearBytes() int {
	return s.near.Bytes() + cap(s.nearRoots)*8 + cap(s.nearFree)*4
}

// expand recovers a 64-bit tick from its low 32 bits: deadlines stay within
// 2^31 ticks of now (MaxTimeout is far fewer ticks at MinTick).
func (s *Shard) expand(d uint32) uint64 {
	return uint64(int64(s.nowTick) + int64(int32(d-uint32(s.nowTick))))
}

// deadlineOf is e's deadline.
func (s *Shard) deadlineOf(e *entry) uint64 {
	if e.word()&flagNear != 0 {
		d, _ := s.near.Deadline(uint32(e.meta))
		return d
	}
	return s.expand(uint32(e.meta))
}

// setDeadline (re)arms e's timeout at tick d, giving it a near timer when
// d is before limit and taking its near timer away when not.
func (s *Shard) setDeadline(e *entry, d uint64) {
	w := e.word()
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

// rescan gives e a near timer if it is a far entry due before limit.
func (s *Shard) rescan(e *entry) {
	if e.key != 0 && e.word()&flagNear == 0 {
		if d := s.expand(uint32(e.meta)); d < s.limit {
			e.meta = uint64(e.word()|flagNear)<<32 | uint64(s.allocNear(e.key, d))
		}
	}
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

// growNear doubles the near wheel, moving its live timers over. Handles
// never exceed the number of entries, so it stops at MaxPending.
func (s *Shard) growNear() {
	old := s.near
	n := min(2*old.Capacity(), max(s.maxPending, nearInitial))
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
	for h := n - 1; h >= old.Capacity(); h-- {
		free = append(free, uint32(h))
	}
	s.near, s.nearRoots, s.nearFree = w, roots, free
}

// advanceNear runs the pass logic (see nearTimers) for the current tick:
// it starts a pass a window before limit, reads the share of the table due
// by now, and finishes the pass at once when time has reached its horizon.
func (s *Shard) advanceNear() {
	slots := s.t.slots()
	for {
		if s.scan < 0 {
			if s.nowTick+s.window < s.limit {
				return
			}
			s.horizon = s.limit
			s.limit = max(s.limit, s.nowTick) + s.window
			s.passStart = s.nowTick
			s.scan = 0
		}
		target := slots
		if s.nowTick < s.horizon {
			half := max(s.window/2, 1)
			if el := s.nowTick - s.passStart + 1; el < half {
				target = int(uint64(slots) * el / half)
			}
		}
		es := s.t.e
		for ; s.scan < target; s.scan++ {
			s.rescan(&es[s.scan])
		}
		if s.scan < slots {
			return
		}
		s.scan = -1
		s.horizon = s.limit
	}
}
