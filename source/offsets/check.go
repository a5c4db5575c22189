package offsets

import (
	"fmt"
	"math/bits"

	"github.com/xorack/xorack/internal/invariants"
)

// afterOp runs the whole check after an operation, as often as
// fullCheckBits allows. It does nothing unless built with -tags invariants.
func (t *Tracker) afterOp() {
	if !invariants.Enabled {
		return
	}
	t.debugOps++
	if n := uint64(len(t.done)) * 64; n <= fullCheckBits || t.debugOps%(n/fullCheckBits) == 0 {
		t.check()
	}
}

// check panics, naming the broken invariant, if the tracker's state is
// inconsistent. Tests call it directly; -tags invariants runs it after
// operations. It costs O(ring + runs).
func (t *Tracker) check() {
	fail := func(format string, args ...any) {
		panic(fmt.Sprintf("offsets: invariant: "+format, args...))
	}
	window := t.nextSeq - t.commitSeq
	if t.commitSeq > t.nextSeq || window > t.limit {
		fail("window [%d, %d) longer than limit %d", t.commitSeq, t.nextSeq, t.limit)
	}
	if t.gen == 0 && (t.nextSeq != 0 || t.pending != 0) {
		fail("unassigned tracker has %d records, %d pending", t.nextSeq, t.pending)
	}
	// The done bits: ones only inside [commitSeq, nextSeq), never at
	// commitSeq, and as many zeros inside as records pending.
	ringBits := t.ringMask + 1
	var ones uint64
	for i, w := range t.done {
		ones += uint64(bits.OnesCount64(w))
		for w != 0 {
			b := uint64(i)*64 + uint64(bits.TrailingZeros64(w))
			w &= w - 1
			// The seq in the window that maps to slot b.
			off := (b - t.commitSeq) & t.ringMask
			if off >= window {
				fail("done bit %d set outside the window [%d, %d) (ring of %d bits)", b, t.commitSeq, t.nextSeq, ringBits)
			}
			if off == 0 {
				fail("done bit set at commitSeq %d", t.commitSeq)
			}
		}
	}
	if ones+t.pending != window {
		fail("%d done + %d pending != %d records in the window", ones, t.pending, window)
	}
	// The runs: present exactly when the window is not empty; the oldest
	// holds commitSeq, seqs and offsets strictly increase, a new run only
	// where the offset is not one above the previous record's, and the
	// last record's offset is next-1.
	if (t.runLen == 0) != (window == 0) {
		fail("%d runs for a window of %d records", t.runLen, window)
	}
	if t.runLen > 0 {
		mask := len(t.runs) - 1
		first := t.runs[t.runHead]
		if first.seq > t.commitSeq {
			fail("oldest run starts at seq %d, after commitSeq %d", first.seq, t.commitSeq)
		}
		prev := first
		for i := 1; i < t.runLen; i++ {
			r := t.runs[(t.runHead+i)&mask]
			if r.seq <= prev.seq || (i == 1 && r.seq <= t.commitSeq) || r.seq >= t.nextSeq {
				fail("run %d at seq %d out of order (previous %d, window [%d, %d))", i, r.seq, prev.seq, t.commitSeq, t.nextSeq)
			}
			if r.off <= prev.off+int64(r.seq-prev.seq) {
				fail("run %d at offset %d does not follow a gap after run at offset %d", i, r.off, prev.off)
			}
			prev = r
		}
		if last := prev.off + int64(t.nextSeq-1-prev.seq); last != t.next-1 {
			fail("last record's offset %d, want next-1 = %d", last, t.next-1)
		}
	}
	if t.gen != 0 && t.next < t.start {
		fail("next offset %d below the assignment's start %d", t.next, t.start)
	}
}
