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
//   - every key is found by find at its slot, and no key appears twice;
//   - every slot from a key's home up to its own is occupied (the probe
//     invariant); each run of occupied slots is sorted by home (Robin Hood
//     order: a distance grows by at most one from slot to slot); each entry
//     stores its distance (saturated at distSat);
//   - an entry has a near timer (flagNear) exactly when the record of its
//     handle names it and the near wheel has that handle scheduled, and the
//     near wheel holds nothing else;
//   - a far entry's deadline is at or after the limit it was compared
//     with: limit where a running pass has read it (or none runs), the
//     horizon before the pass where it has not;
//   - the custom map holds exactly the roots whose word has flagCustom;
//   - flags are consistent: flagFailed only without flagInit.
func (s *Shard) verify() error {
	t := &s.t
	n, near := 0, 0
	seen := make(map[uint64]int, t.count)
	customs := 0
	for i := range t.e {
		e := &t.e[i]
		k := e.key
		if k == 0 {
			if e.val != 0 || e.meta != 0 {
				return fmt.Errorf("ackcore: empty slot %d holds val %#x meta %#x", i, e.val, e.meta)
			}
			continue
		}
		n++
		if j, dup := seen[k]; dup {
			return fmt.Errorf("ackcore: root %#x in slots %d and %d", k, j, i)
		}
		seen[k] = i
		w := e.word()
		if w&flagFailed != 0 && w&flagInit != 0 {
			return fmt.Errorf("ackcore: root %#x both failed-before-INIT and INIT", k)
		}
		if w&flagCustom != 0 {
			customs++
			if _, ok := s.custom[k]; !ok {
				return fmt.Errorf("ackcore: root %#x flagged custom, not in the custom map", k)
			}
		}
		if w&flagNear != 0 {
			near++
			h := uint32(e.meta)
			if int(h) >= len(s.nearRoots) || s.nearRoots[h] != k || !s.near.Scheduled(h) {
				return fmt.Errorf("ackcore: root %#x has near timer %d, not scheduled for it", k, h)
			}
		} else {
			lim := s.limit
			if i >= s.scan && s.scan >= 0 {
				lim = s.horizon
			}
			if d := s.expand(uint32(e.meta)); d < lim {
				return fmt.Errorf("ackcore: root %#x in slot %d is due at tick %d, before limit %d, without a near timer", k, i, d, lim)
			}
		}
		h := t.home(k)
		if d := dist(uint64(i), h, t.n); e.storedDist() != min(d, distSat) {
			return fmt.Errorf("ackcore: root %#x in slot %d, home %d, stores distance %d", k, i, h, e.storedDist())
		} else if d > 0 {
			p := (uint64(i) + t.n - 1) % t.n
			if pk := t.e[p].key; pk != 0 && d > dist(p, t.home(pk), t.n)+1 {
				return fmt.Errorf("ackcore: root %#x in slot %d, home %d, after root %#x homed at %d: not in Robin Hood order", k, i, h, pk, t.home(pk))
			}
		}
		for h := t.home(k); h != uint64(i); {
			if t.e[h].key == 0 {
				return fmt.Errorf("ackcore: root %#x in slot %d, home %d, passes empty slot %d", k, i, t.home(k), h)
			}
			if h++; h == t.n {
				h = 0
			}
		}
		if slot, ok := t.find(k); !ok || slot != i {
			return fmt.Errorf("ackcore: find(%#x) = %d, %v; stored in %d", k, slot, ok, i)
		}
	}
	if n != t.count {
		return fmt.Errorf("ackcore: count %d, occupied slots %d", t.count, n)
	}
	if n > s.maxPending {
		return fmt.Errorf("ackcore: %d entries exceed MaxPending %d", n, s.maxPending)
	}
	if s.near.Len() != near || len(s.nearRoots)-len(s.nearFree) != near {
		return fmt.Errorf("ackcore: %d near timers and %d handles in use for %d near entries", s.near.Len(), len(s.nearRoots)-len(s.nearFree), near)
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
	for i := range s.t.e {
		k := s.t.e[i].key
		if k == 0 {
			continue
		}
		c := cur{root: k, slot: i, inTable: true, live: true, word: s.t.e[i].word()}
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
		en := &s.t.e[e.slot]
		w := en.word()
		task := NoTask
		if w&flagInit != 0 {
			task = w & taskMask
		}
		d := s.deadlineOf(en)
		dst = append(dst, PendingRoot{
			Root:     en.key,
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
