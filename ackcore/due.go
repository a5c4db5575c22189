package ackcore

// Time and expiry: the shard's time per call, deadlines and latencies in
// ticks, and Expire, which works through the near wheel, the due lists and
// the pass (the scheme is near.go's).

import (
	"fmt"
	"time"

	"github.com/xorack/xorack/internal/invariants"
)

// maxStepTicks is the most a shard's time moves in one call. A clock that
// jumps further (a machine suspended for weeks) is taken to have jumped
// this far: every root pending at the jump times out (no deadline is 2^29
// ticks away: MaxTimeout is at most 2^30 ticks at MinTick, 2^27 at 1 ms),
// none times out early, and the 32-bit deadlines in the table, recovered
// relative to now, stay unambiguous. Latencies that span the jump are
// understated by the excess.
const maxStepTicks = 1 << 29

func (s *Shard) setNow() {
	ns := int64(s.clock.Now()) - s.skewNs
	if ns < s.nowNs {
		ns = s.nowNs // a clock that steps back: time stands still
	}
	if step, most := ns-s.nowNs, maxStepTicks*s.tickNs; step > most {
		s.skewNs += step - most // a jump: see maxStepTicks
		ns = s.nowNs + most
	}
	s.nowNs = ns
	s.nowTick = uint64(ns / s.tickNs)
	s.defDeadline = uint64((ns + s.defNs + s.tickNs - 1) / s.tickNs)
	if s.prog != nil {
		s.progNow = uint32(s.nowStart())
	}
	if s.fails.active() {
		s.fails.rotate(s.nowTick)
	}
}

// deadlineAfter is the tick at which a timeout of ns started now expires:
// the first tick boundary at or after now+ns, so a root never times out
// early and at most one tick late when Expire runs every tick.
func (s *Shard) deadlineAfter(ns int64) uint64 {
	if ns == s.defNs {
		return s.defDeadline // computed once per call: no division per INIT
	}
	return uint64((s.nowNs + ns + s.tickNs - 1) / s.tickNs)
}

// nowStart is the start tick recorded for an INIT (or a creation) now: the
// tick boundary at or after now, the same rounding deadlineAfter uses, so
// that a default entry's start is exactly its deadline minus the default
// timeout.
func (s *Shard) nowStart() uint64 { return uint64((s.nowNs + s.tickNs - 1) / s.tickNs) }

// latency is the time since an INIT whose start tick is start. The INIT
// happened within the tick before start, so half a tick is added back: the
// error is at most half a tick.
func (s *Shard) latency(start uint64) time.Duration {
	d := s.nowNs - int64(start)*s.tickNs + s.tickNs/2
	if d < 0 {
		return 0
	}
	return time.Duration(d)
}

// expand recovers a 64-bit tick from its low 32 bits: deadlines stay within
// 2^31 ticks of now (MaxTimeout is at most 2^30 ticks at MinTick, a call
// moves time by at most maxStepTicks, and Expire runs at least every 2^30
// ticks).
func (s *Shard) expand(d uint32) uint64 {
	return uint64(int64(s.nowTick) + int64(int32(d-uint32(s.nowTick))))
}

// deadlineOf is e's deadline.
func (s *Shard) deadlineOf(e *entry) uint64 {
	if e.word().near() {
		d, _ := s.near.Deadline(uint32(e.meta))
		return d
	}
	return s.expand(uint32(e.meta))
}

// Expire reports the roots whose deadline has passed, appending at most
// cap(out)-len(out) outcomes, and returns more == true when it stopped
// early: for lack of room, or at the end of its slice of work
// (16,384 slots, 1,024 entries). Call it again then;
// every call makes progress, so `for more { ... }` ends. A call with no
// room at all (len(out) == cap(out)) does nothing and returns more ==
// false: give it room. Roots that never saw INIT are dropped silently and
// counted as orphans (rule 6).
func (s *Shard) Expire(out []Outcome) (_ []Outcome, more bool) {
	s.setNow()
	s.call = expireWork{}
	if len(out) == cap(out) {
		return out, false
	}
	n := len(out)
	out, more = s.expireNear(out)
	if !more {
		out, more = s.expireDue(out)
	}
	if !more {
		out, more = s.advancePass(out)
	}
	if s.near != nil && s.near.Len() == 0 && s.near.Capacity() > nearInitial {
		s.resetNearWheel() // back to idle after a burst of near timers
	}
	s.call.Outcomes = len(out) - n
	return out, more
}

// expireAll is Expire without a room limit: it appends every due outcome,
// growing out as needed, over as many slices as it takes.
func (s *Shard) expireAll(out []Outcome) []Outcome {
	for {
		if cap(out)-len(out) < 64 {
			out = append(out, make([]Outcome, 64)...)[:len(out)]
		}
		var more bool
		out, more = s.Expire(out)
		if !more {
			return out
		}
	}
}

// entryBudget reports whether the call may examine one more entry.
func (s *Shard) entryBudget() bool { return s.call.Entries < expireEntryLimit }

// scanBudget reports whether the call may read one more slot or bucket.
func (s *Shard) scanBudget() bool { return s.call.Slots < expireScanLimit }

// expireNear fires the near wheel's due timers.
func (s *Shard) expireNear(out []Outcome) (_ []Outcome, more bool) {
	if s.near == nil {
		return out, false // no near timer yet
	}
	for {
		if len(out) == cap(out) || !s.entryBudget() {
			return out, true
		}
		h, deadline, ok := s.near.ExpireDeadline(s.nowTick)
		if !ok {
			return out, false
		}
		s.call.Entries++
		root := s.nearRoots[h]
		s.releaseNear(h)
		slot, found := s.t.find(root)
		e := &s.t.e[slot]
		if !found || !e.word().near() || uint32(e.meta) != h {
			if invariants.Enabled {
				panic(fmt.Sprintf("ackcore: near timer %d fired for root %#x, not in the table with that timer", h, root))
			}
			continue
		}
		e.meta = uint64(uint32(e.word())&^flagNear)<<32 | uint64(uint32(deadline)) // its timer just fired
		out = s.expireSlot(slot, deadline, out)
	}
}

// expireDue takes the due lists of the ticks up to now.
func (s *Shard) expireDue(out []Outcome) (_ []Outcome, more bool) {
	d := &s.due
	for d.cursor <= s.nowTick {
		if d.records == 0 {
			d.cursor = s.nowTick + 1
			break
		}
		for {
			if len(out) == cap(out) || !s.entryBudget() {
				return out, true
			}
			root, ok := d.take(d.cursor)
			if !ok {
				break
			}
			s.call.Entries++
			slot, found := s.t.find(root)
			if !found {
				continue // completed, failed or expired since it was listed
			}
			e := &s.t.e[slot]
			if e.word().near() {
				continue // re-armed near since
			}
			dl := s.expand(uint32(e.meta))
			if dl > s.nowTick {
				continue // a RESET moved it on: far again, or listed again
			}
			out = s.expireSlot(slot, dl, out)
		}
		if !s.scanBudget() {
			return out, true
		}
		s.call.Slots++
		d.cursor++
	}
	return out, false
}

// advancePass runs the pass (see nearTimers) for the current tick: it
// starts a pass a window before limit, reads the share of the table due
// by now, and, once time has reached the pass's horizon, reads on as far
// as its slice allows (more == true until it is done).
func (s *Shard) advancePass(out []Outcome) (_ []Outcome, more bool) {
	slots := s.t.slots()
	for {
		if s.scan < 0 {
			if s.nowTick+s.window < s.limit {
				return out, false
			}
			s.horizon = s.limit
			s.limit = max(s.limit, s.nowTick+1) + s.window
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
		for s.scan < target {
			if !s.scanBudget() {
				return out, true
			}
			s.call.Slots++
			e := &es[s.scan]
			if e.key == 0 || e.word().near() {
				s.scan++
				continue
			}
			d := s.expand(uint32(e.meta))
			if d < s.horizon || d >= s.limit {
				s.scan++ // listed by an earlier pass, or far
				continue
			}
			if d > s.nowTick {
				if !s.due.add(e.key, d) {
					panic(fmt.Sprintf("ackcore: deadline %d outside the due lists [%d, %d)", d, s.due.cursor, s.due.cursor+s.due.span))
				}
				s.scan++
				continue
			}
			// Already due: the pass is behind. Expire it here (the slot
			// is empty after).
			if e.word().inited() && len(out) == cap(out) {
				return out, true
			}
			out = s.expireSlot(s.scan, d, out)
		}
		if s.scan < slots {
			return out, false
		}
		s.scan = -1
		s.horizon = s.limit
		s.trimTiming()
	}
}

// expireSlot expires the entry in slot, due at tick deadline and without a
// near timer: Failed{timeout} with its latency if it saw INIT, else an
// orphan; or, with ProgressTimeout, re-arms it if it progressed since.
func (s *Shard) expireSlot(slot int, deadline uint64, out []Outcome) []Outcome {
	e := &s.t.e[slot]
	if w := e.word(); w.inited() && s.prog != nil {
		if d, ok := s.progressDeadline(slot, e, deadline); ok {
			s.rearm(slot, d) // progress came since: not due yet (progress.go)
			return out
		}
	}
	return s.endEntry(slot, deadline, ReasonTimeout, out)
}

// endEntry removes the entry in slot, whose deadline is deadline, for
// reason (ReasonTimeout: expired; ReasonStopped: StopAll): Failed{reason}
// with its latency if it saw INIT, else counted as an orphan.
func (s *Shard) endEntry(slot int, deadline uint64, reason Reason, out []Outcome) []Outcome {
	e := &s.t.e[slot]
	if w := e.word(); w.inited() {
		start, _ := s.startTimeout(slot, e, deadline)
		if reason == ReasonTimeout {
			s.stats.FailedTimeout++
		} else {
			s.stats.FailedStopped++
		}
		out = append(out, Outcome{Root: e.key, Task: w.spoutTask(), Kind: Failed, Reason: reason, Latency: s.latency(start)})
	} else {
		s.stats.Orphans++
		s.orphanGone(w)
	}
	s.dropEntry(slot)
	return out
}
