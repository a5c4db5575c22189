package timerwheel

import "fmt"

// checkHandle panics if h is not a handle of w. Called under
// invariants.Enabled only; release builds rely on the bounds check of
// w.timers.
func (w *Wheel) checkHandle(op string, h Handle) {
	if uint64(h) >= uint64(len(w.timers)) {
		panic(fmt.Sprintf("timerwheel: %s of handle %d out of range [0, %d)", op, h, len(w.timers)))
	}
}

// afterOp runs the debug checks after an operation that touched handles a
// and b: their links at once, the whole wheel as often as fullCheckNodes
// allows. Called under invariants.Enabled only.
func (w *Wheel) afterOp(a, b Handle) {
	w.checkLinks(a)
	w.checkLinks(b)
	w.debugOps++
	if n := uint64(len(w.nodes)); n <= fullCheckNodes || w.debugOps%(n/fullCheckNodes) == 0 {
		w.check()
	}
}

// checkLinks panics if node h is scheduled and its neighbours do not point
// back at it.
func (w *Wheel) checkLinks(h Handle) {
	if int(h) >= len(w.timers) {
		return
	}
	n := w.nodes[h]
	if (n.next == unlinked) != (n.prev == unlinked) {
		panic(fmt.Sprintf("timerwheel: handle %d half linked (prev %d, next %d)", h, n.prev, n.next))
	}
	if n.next != unlinked && (w.nodes[n.next].prev != h || w.nodes[n.prev].next != h) {
		panic(fmt.Sprintf("timerwheel: handle %d: neighbours %d and %d do not point back", h, n.prev, n.next))
	}
}

// check panics with the first broken invariant (see verify). It costs
// O(Capacity()+320): tests call it directly, and with -tags invariants every
// operation calls it (amortized on large wheels, see fullCheckNodes).
func (w *Wheel) check() {
	if err := w.verify(); err != nil {
		panic(err)
	}
}

// verify returns the first broken invariant, or nil:
//   - the node slice holds Capacity() timer nodes and numBuckets sentinels;
//   - every bucket list is circular through its sentinel, each link
//     mirrored by the neighbour's opposite link, and holds timer nodes only;
//   - every timer in a bucket has a deadline within MaxDelay of now, and
//     the bucket is the one bucketOf gives for max(deadline, now): so a
//     level-0 bucket holds one tick, a higher bucket's range contains the
//     deadline, nothing is behind now except in the current tick's bucket,
//     and equal deadlines share a bucket;
//   - the occupancy bitmaps have a bit set exactly for non-empty buckets;
//   - the timers found in buckets are exactly the scheduled handles (prev
//     and next both unlinked otherwise), and their count is Len().
//
// It allocates nothing unless it fails.
func (w *Wheel) verify() error {
	nodes := w.nodes
	capacity := len(w.timers)
	if uint64(capacity) != uint64(w.base) || len(nodes) != capacity+numBuckets {
		return fmt.Errorf("timerwheel: %d nodes for capacity %d (base %d)", len(nodes), capacity, w.base)
	}
	found := 0
	for b := uint32(0); b < numBuckets; b++ {
		s := w.base + b
		level, slot := b>>slotBits, b&slotMask
		n := 0
		prev := s
		for x := nodes[s].next; x != s; x = nodes[x].next {
			if x >= w.base {
				return fmt.Errorf("timerwheel: bucket %d/%d: link to node %d, not a timer", level, slot, x)
			}
			if nodes[x].prev != prev {
				return fmt.Errorf("timerwheel: bucket %d/%d: node %d has prev %d, want %d", level, slot, x, nodes[x].prev, prev)
			}
			dist := int64(int32(nodes[x].deadline - uint32(w.now)))
			if dist > int64(MaxDelay) || dist < -int64(MaxDelay) {
				return fmt.Errorf("timerwheel: handle %d: deadline %d ticks from now %d, beyond MaxDelay", x, dist, w.now)
			}
			d := w.full(nodes[x].deadline)
			if want := w.bucketOf(max(d, w.now)); want != b {
				return fmt.Errorf("timerwheel: handle %d: deadline %d in bucket %d/%d at now %d, want %d/%d",
					x, d, level, slot, w.now, want>>slotBits, want&slotMask)
			}
			n++
			if n > capacity {
				return fmt.Errorf("timerwheel: bucket %d/%d: list longer than capacity %d (a cycle)", level, slot, capacity)
			}
			prev = x
		}
		if nodes[s].prev != prev {
			return fmt.Errorf("timerwheel: bucket %d/%d: sentinel prev %d, want tail %d", level, slot, nodes[s].prev, prev)
		}
		if bit := w.occupied[level]>>slot&1 == 1; bit != (n > 0) {
			return fmt.Errorf("timerwheel: bucket %d/%d: occupancy bit %v with %d timers", level, slot, bit, n)
		}
		found += n
	}
	scheduled := 0
	for h, n := range w.timers {
		if (n.next == unlinked) != (n.prev == unlinked) {
			return fmt.Errorf("timerwheel: handle %d half linked (prev %d, next %d)", h, n.prev, n.next)
		}
		if n.next != unlinked {
			scheduled++
		}
	}
	if found != scheduled || found != w.length {
		return fmt.Errorf("timerwheel: %d timers in buckets, %d handles scheduled, Len %d", found, scheduled, w.length)
	}
	return nil
}
