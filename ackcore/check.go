package ackcore

import (
	"container/heap"
	"fmt"
	"slices"
	"time"

	"github.com/xorack/xorack/internal/sliceheap"
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
//   - count equals the occupied slots and never exceeds MaxPending plus
//     the FAIL reserve;
//   - every key is found by find at its slot, and no key appears twice;
//   - a slot has a tag exactly when it holds a key, and the tag is the
//     key's; each group's overflow count is the number of entries from
//     an earlier home (or this one) in a later group, unless sticky (the
//     probe invariant: a lookup reads on past every group such an entry
//     passed); each entry stores its distance in groups from its home
//     (saturated at distSat);
//   - an entry has a near timer (flagNear) exactly when the record of its
//     handle names it and the near wheel has that handle scheduled, and the
//     near wheel holds nothing else;
//   - a far entry due before the limit it was compared with (limit where a
//     running pass has read it, or none runs; the horizon before the pass
//     where it has not) has its root on the due list of its deadline's
//     tick; the due lists count their records right;
//   - timing: an entry of kind 1 or 2 has an ext array to keep X in, and
//     extCount counts them; the side map holds exactly the kind-3 roots;
//   - flags are consistent: without INIT the task bits hold nothing but
//     flagFailed and the orphan tag;
//   - the orphan count is the number of entries without INIT, and the
//     orphan FIFO holds at least that many roots, within its bound; each
//     orphan's root is queued with the orphan's tag, where tags cannot
//     repeat in the FIFO.
func (s *Shard) verify() error {
	t := &s.t
	n, near, side, ext, orphans := 0, 0, 0, 0, 0
	owned := make([]int, len(s.ownerOrphans))
	seen := make(map[uint64]int, t.count)
	passed := make([]int, t.ng)     // per group, the entries that passed it
	listed := map[uint64][]uint64{} // root -> the ticks it is listed for
	records := 0
	s.due.each(func(root, tick uint64) {
		listed[root] = append(listed[root], tick)
		records++
	})
	if records != s.due.records {
		return fmt.Errorf("ackcore: due lists hold %d records, count %d", records, s.due.records)
	}
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
		if !w.inited() {
			if o := s.ownerOf(w); o >= len(s.ownerOrphans) {
				return fmt.Errorf("ackcore: root %#x without INIT has owner %d of %d (task bits %#x)", k, o, len(s.ownerOrphans), w.orphanBits())
			} else {
				owned[o]++
			}
			orphans++
		}
		switch kindOf(w) {
		case kindSide:
			side++
			if _, ok := s.side.get(k); !ok {
				return fmt.Errorf("ackcore: root %#x of kind side, not in the side map", k)
			}
		case kindTimeout, kindExtended:
			ext++
			if s.ext == nil {
				return fmt.Errorf("ackcore: root %#x of kind %d without an ext array", k, kindOf(w))
			}
		}
		if w.near() {
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
			// The pass lists a root for its deadline's tick, and a root
			// whose deadline moves before the limit gets a near timer, so
			// the record is for tick d itself: one for another tick (a
			// stale one, or one in the wrong bucket) is skipped or fired
			// early when its tick is taken.
			if d := s.expand(uint32(e.meta)); d < lim && !slices.Contains(listed[k], d) {
				return fmt.Errorf("ackcore: root %#x in slot %d is due at tick %d, before limit %d, with neither a near timer nor a due record for that tick (listed for %v)", k, i, d, lim, listed[k])
			}
		}
		h, tag := t.hashOf(k)
		g := uint64(i) / groupSlots
		if got := t.tags(g)[uint64(i)-g*groupSlots]; got != tag {
			return fmt.Errorf("ackcore: root %#x in slot %d has tag %#x, hashes to %#x", k, i, got, tag)
		}
		if d := t.groupDist(g, h); e.storedDist() != min(d, distSat) {
			return fmt.Errorf("ackcore: root %#x in slot %d (group %d), home %d, stores distance %d", k, i, g, h, e.storedDist())
		}
		for x := h; x != g; x = t.next(x) {
			passed[x]++
		}
		if slot, ok := t.find(k); !ok || slot != i {
			return fmt.Errorf("ackcore: find(%#x) = %d, %v; stored in %d", k, slot, ok, i)
		}
	}
	if n != t.count {
		return fmt.Errorf("ackcore: count %d, occupied slots %d", t.count, n)
	}
	if t.ctrl[t.ng] != (group{^uint64(0), ^uint64(0)}) {
		return fmt.Errorf("ackcore: the sentinel control word is %#x", t.ctrl[t.ng])
	}
	for g := range t.ng {
		tg := t.tags(g)
		for j := range uint64(groupSlots) {
			if (tg[j] == 0) != (t.e[g*groupSlots+j].key == 0) {
				return fmt.Errorf("ackcore: slot %d has tag %#x and key %#x", g*groupSlots+j, tg[j], t.e[g*groupSlots+j].key)
			}
		}
		if c := t.overflow(g); c != overflowSticky && int(c) != passed[g] {
			return fmt.Errorf("ackcore: group %d counts %d entries past it, %d passed it", g, c, passed[g])
		}
	}
	if n > s.maxPending+s.failReserve {
		return fmt.Errorf("ackcore: %d entries exceed MaxPending %d plus the FAIL reserve %d", n, s.maxPending, s.failReserve)
	}
	if s.nearLen() != near || len(s.nearRoots)-len(s.nearFree) != near {
		return fmt.Errorf("ackcore: %d near timers and %d handles in use for %d near entries", s.nearLen(), len(s.nearRoots)-len(s.nearFree), near)
	}
	if side != s.side.len() {
		return fmt.Errorf("ackcore: %d entries of kind side, %d in the side table", side, s.side.len())
	}
	for o, n := range owned {
		if n != int(s.ownerOrphans[o]) {
			return fmt.Errorf("ackcore: owner %d has %d orphans, counted %d", o, n, s.ownerOrphans[o])
		}
	}
	if orphans != s.orphans {
		return fmt.Errorf("ackcore: %d entries without INIT, orphan count %d", orphans, s.orphans)
	}
	if s.orphanQ.n < s.orphans || s.orphanQ.n > len(s.orphanQ.q) || len(s.orphanQ.q) > max(orphanInitial, 2*(s.maxPending+s.failReserve)) {
		return fmt.Errorf("ackcore: orphan FIFO holds %d roots in %d places for %d orphans", s.orphanQ.n, len(s.orphanQ.q), s.orphans)
	}
	// Every orphan is evictable: its root is queued with its live tag.
	// Checked while no two
	// places the FIFO can hold share a tag (otherwise queueOrphan may
	// drop a live root early, as orphans.go says).
	if most := 2 * (s.maxPending + s.failReserve); most <= int(s.orphanQ.mask>>tagShift)+1 {
		// No two places share a tag, so a root's entry matches one place
		// at most: the live places are distinct orphans.
		live := 0
		f := &s.orphanQ
		for i := range uint64(f.n) {
			if _, ok := s.orphanSlot(f.at(i)); ok {
				live++
			}
		}
		if live < s.orphans {
			return fmt.Errorf("ackcore: %d orphans, %d queued with their tags: some cannot give way", s.orphans, live)
		}
	}
	if ext != s.extCount {
		return fmt.Errorf("ackcore: %d entries keep X in ext, extCount %d", ext, s.extCount)
	}
	return nil
}

// PendingRoot describes one pending entry.
type PendingRoot struct {
	Root uint64
	Task uint32        // NoTask if no INIT was seen yet
	Age  time.Duration // since the INIT, or, without INIT, since the entry was made
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
	// A max-heap on start: its top is the youngest of the n kept.
	h := &sliceheap.Heap[startSlot]{Before: func(a, b startSlot) bool { return a.start > b.start }}
	for i := range s.t.e {
		k := s.t.e[i].key
		if k == 0 {
			continue
		}
		e := &s.t.e[i]
		st, _ := s.startTimeout(i, e, s.deadlineOf(e))
		if h.Len() < n {
			heap.Push(h, startSlot{st, i})
		} else if st < h.S[0].start {
			h.S[0] = startSlot{st, i}
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
		if w.inited() {
			task = w.spoutTask()
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
