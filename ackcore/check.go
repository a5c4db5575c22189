package ackcore

import (
	"container/heap"
	"fmt"
	"time"
)

// check verifies the shard's invariants and panics on the first violation.
// It costs O(slots): tests call it directly, and every Apply/Expire step
// calls it when built with -tags invariants.
func (s *Shard) check() {
	if err := s.verify(); err != nil {
		panic(err)
	}
}

// verify returns the first broken invariant:
//   - count equals the occupied slots and never exceeds MaxPending;
//   - every key is found by find, and no key appears twice;
//   - every key finds all groups from its home up to its own full (the
//     probe invariant backward shift keeps), and is flagged displaced
//     exactly when it is not in its home group;
//   - each group's occupancy mask matches its keys;
//   - a slot has a scheduled timer exactly when it is occupied;
//   - the custom map holds exactly the roots whose word has flagCustom;
//   - flags are consistent: flagFailed only without flagInit.
func (s *Shard) verify() error {
	t := &s.t
	n := 0
	seen := make(map[uint64]int, t.count)
	customs := 0
	for i := 0; i < t.slots(); i++ {
		k := t.kv[ki(i)]
		if k == 0 {
			if s.w.Scheduled(uint32(i)) {
				return fmt.Errorf("ackcore: empty slot %d has a timer", i)
			}
			continue
		}
		n++
		if j, dup := seen[k]; dup {
			return fmt.Errorf("ackcore: root %#x in slots %d and %d", k, j, i)
		}
		seen[k] = i
		if !s.w.Scheduled(uint32(i)) {
			return fmt.Errorf("ackcore: root %#x in slot %d has no timer", k, i)
		}
		w := t.words[i]
		if w&flagFailed != 0 && w&flagInit != 0 {
			return fmt.Errorf("ackcore: root %#x both failed-before-INIT and INIT", k)
		}
		if w&flagCustom != 0 {
			customs++
			if _, ok := s.custom[k]; !ok {
				return fmt.Errorf("ackcore: root %#x flagged custom, not in the custom map", k)
			}
		}
		g := uint64(i / groupSlots)
		if disp := t.meta[g]>>groupSlots>>(i%groupSlots)&1 == 1; disp != (t.home(k) != g) {
			return fmt.Errorf("ackcore: root %#x in group %d, home %d, displaced flag %v", k, g, t.home(k), disp)
		}
		for h := t.home(k); h != g; {
			if t.meta[h]&metaFullMask != metaFullMask {
				return fmt.Errorf("ackcore: root %#x in group %d, home %d, passes non-full group %d", k, g, t.home(k), h)
			}
			if h++; h == t.ngroups {
				h = 0
			}
		}
		if slot, ok := t.find(k); !ok || slot != i {
			return fmt.Errorf("ackcore: find(%#x) = %d, %v; stored in %d", k, slot, ok, i)
		}
	}
	for g, m := range t.meta {
		var mask uint16
		for i, k := range t.groupKeys(uint64(g)) {
			if k != 0 {
				mask |= 1 << i
			}
		}
		if m&metaFullMask != mask {
			return fmt.Errorf("ackcore: group %d occupancy %08b, keys say %08b", g, m&metaFullMask, mask)
		}
	}
	if n != t.count {
		return fmt.Errorf("ackcore: count %d, occupied slots %d", t.count, n)
	}
	if n > s.maxPending {
		return fmt.Errorf("ackcore: %d entries exceed MaxPending %d", n, s.maxPending)
	}
	if s.w.Len() != n {
		return fmt.Errorf("ackcore: %d timers for %d entries", s.w.Len(), n)
	}
	if customs != len(s.custom) {
		return fmt.Errorf("ackcore: %d custom entries flagged, %d in the map", customs, len(s.custom))
	}
	return nil
}

// PendingRoot describes one pending entry.
type PendingRoot struct {
	Root uint64
	Task uint32        // NoTask if no INIT was seen yet
	Age  time.Duration // since the INIT (or since the entry was made, without INIT)
	// Deadline is how long until the root times out (negative: overdue,
	// waiting for the next Expire).
	Deadline time.Duration
}

// OldestPending appends to dst up to n pending roots, oldest first. It scans
// the whole table (O(slots + n log n)): a diagnostic, not a hot path.
func (s *Shard) OldestPending(n int, dst []PendingRoot) []PendingRoot {
	if n <= 0 {
		return dst
	}
	s.setNow()
	h := &byStart{}
	for i := 0; i < s.t.slots(); i++ {
		k := s.t.kv[ki(i)]
		if k == 0 {
			continue
		}
		c := cur{root: k, slot: i, inTable: true, live: true, word: s.t.words[i]}
		st := s.start(&c)
		if c.word&flagCustom != 0 && c.word&flagInit == 0 {
			// No INIT: its age runs from its deadline minus its timeout.
			st = s.currentDeadline(&c) - uint64(s.timeoutNs(&c)+s.tickNs-1)/uint64(s.tickNs)
		}
		if h.Len() < n {
			heap.Push(h, startSlot{st, i})
		} else if st < h.s[0].start {
			h.s[0] = startSlot{st, i}
			heap.Fix(h, 0)
		}
	}
	res := make([]startSlot, h.Len())
	for i := len(res) - 1; i >= 0; i-- {
		res[i] = heap.Pop(h).(startSlot)
	}
	tick := time.Duration(s.tickNs)
	for _, e := range res {
		w := s.t.words[e.slot]
		task := NoTask
		if w&flagInit != 0 {
			task = w & taskMask
		}
		d, _ := s.w.Deadline(uint32(e.slot))
		dst = append(dst, PendingRoot{
			Root:     s.t.kv[ki(e.slot)],
			Task:     task,
			Age:      s.latency(e.start),
			Deadline: time.Duration(int64(d)-int64(s.nowTick)) * tick,
		})
	}
	return dst
}

type startSlot struct {
	start uint64
	slot  int
}

// byStart is a max-heap on start: its top is the youngest of the n kept.
type byStart struct{ s []startSlot }

func (h *byStart) Len() int           { return len(h.s) }
func (h *byStart) Less(i, j int) bool { return h.s[i].start > h.s[j].start }
func (h *byStart) Swap(i, j int)      { h.s[i], h.s[j] = h.s[j], h.s[i] }
func (h *byStart) Push(x any)         { h.s = append(h.s, x.(startSlot)) }
func (h *byStart) Pop() any {
	x := h.s[len(h.s)-1]
	h.s = h.s[:len(h.s)-1]
	return x
}
