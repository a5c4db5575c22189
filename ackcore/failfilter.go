package ackcore

// A FAIL is never lost while the filter below is within its budget (rule
// 3 of docs/semantics.md), not even at the bound. A FAIL for a root with
// no entry must make one, to be remembered until the root's INIT (which
// then reports Failed) or until it expires as an orphan (rule 6). At the
// bound that entry cannot be had like others:
//
//  1. FAILs may make entries beyond MaxPending, up to failReserve more
//     (Stats.FailsReserved counts them). The table is sized for it.
//  2. With the reserve used up too, the root goes into a filter: two
//     generations of a bit set (a Bloom filter with four probes), each
//     taking FAILs for one default timeout and kept for one more, so a
//     root stays in it between one and two timeouts, like an orphan entry (Stats.FailsFiltered counts
//     them). A FAIL-made orphan evicted by an INIT (orphans.go) goes there
//     too. While the filter holds anything, every INIT of a root without a
//     FAIL-flagged entry is checked against it; a hit reports
//     Failed{explicit}. A false positive fails an innocent root, which its
//     spout replays: a replay, never a lost FAIL; but a filter that takes
//     every FAIL of a flood fails every root that follows it.
//  3. So each generation takes at most failBudget FAILs: a sixteenth of
//     its bits. With four probes its false-positive rate is then at most
//     (1-e^(-4/16))^4 = 0.24%, under 0.5% for both generations together,
//     whatever the flood. A FAIL past the budget is dropped (Stats.
//     FailsDropped): its root is failed by its timeout instead, still a
//     replay and never an early ack.
//
// The filter is allocated on first use and dropped when both generations
// are empty.
//
// While the filter holds anything the fast paths leave every INIT of a new
// root to step (so that it is checked).

// failReserveFor is the number of FAIL-only entries a shard with bound
// maxPending keeps beyond it: 1/64 of the bound, at least 16.
func failReserveFor(maxPending int) int { return max(16, maxPending/64) }

// FailBudget is the most FAILs the overflow filter takes in one
// generation (one default timeout); see Stats.FailsDropped.
func (s *Shard) FailBudget() int { return failBudget(filterBits(s.maxPending)) }

// FailReserve is the number of entries beyond MaxPending that FAILs for
// roots without an entry may make (see Stats.FailsReserved).
func (s *Shard) FailReserve() int { return s.failReserve }

// failFilter is the overflow filter (see the top of this file).
type failFilter struct {
	bits  [2][]uint64 // generation g lives in bits[g&1]
	held  [2]int      // FAILs added to each generation
	gen   uint64      // the current generation: nowTick / span
	span  uint64      // ticks per generation
	words int         // len of each bit set (a power of two)
}

// filterBits is the filter's size in bits: the bound, at least 2^12, a
// power of two (a quarter of a byte per root of the bound for the two
// generations).
func filterBits(maxPending int) int {
	b := 1 << 12
	for b < maxPending {
		b <<= 1
	}
	return b
}

// failBudget is the most FAILs one generation of a filter of nbits takes:
// a sixteenth of its bits, where four probes give a false-positive rate
// of 0.24% (see the top of this file).
func failBudget(nbits int) int { return nbits / 16 }

// active reports whether the filter holds anything.
func (f *failFilter) active() bool { return f.held[0]+f.held[1] > 0 }

// filterProbes is the number of bits a root sets and is checked against.
const filterProbes = 4

// probe returns root's i-th bit position (double hashing: h1 + i*h2, with
// h2 odd, from the two halves of the keyed hash h).
func (f *failFilter) probe(h uint64, i int) uint64 {
	m := uint64(f.words*64 - 1)
	return (h + uint64(i)*(h>>32|1)) & m
}

// full reports whether the current generation took its budget.
func (f *failFilter) full(nbits int) bool {
	return f.held[f.gen&1] >= failBudget(nbits)
}

// add puts root, hashed to h, in the current generation.
func (f *failFilter) add(h uint64, nbits int) {
	if f.bits[0] == nil {
		f.words = nbits / 64
		f.bits = [2][]uint64{make([]uint64, f.words), make([]uint64, f.words)}
	}
	b := f.bits[f.gen&1]
	for i := range filterProbes {
		p := f.probe(h, i)
		b[p/64] |= 1 << (p % 64)
	}
	f.held[f.gen&1]++
}

// has reports whether root, hashed to h, may be in the filter.
func (f *failFilter) has(h uint64) bool {
	for g := range f.bits {
		if f.held[g] == 0 {
			continue
		}
		b, hit := f.bits[g], true
		for i := range filterProbes {
			p := f.probe(h, i)
			hit = hit && b[p/64]&(1<<(p%64)) != 0
		}
		if hit {
			return true
		}
	}
	return false
}

// holdFail keeps the FAIL of root, which has no entry, in the filter, or
// drops it past the filter's budget (its root will time out).
func (s *Shard) holdFail(root uint64) {
	f, nbits := &s.fails, filterBits(s.maxPending)
	f.rotate(s.nowTick) // its generation may be stale while it was empty
	if f.full(nbits) {
		s.stats.FailsDropped++
		return
	}
	f.add(mix(root, &s.t.keys), nbits)
	s.stats.FailsFiltered++
}

// rotate moves the filter to the generation of tick now, clearing the
// generations that ended, and frees it when it is empty.
func (f *failFilter) rotate(now uint64) {
	g := now / f.span
	for ; f.gen < g && f.active(); f.gen++ {
		next := (f.gen + 1) & 1
		if f.held[next] > 0 {
			clear(f.bits[next])
			f.held[next] = 0
		}
	}
	f.gen = g
	if !f.active() && f.bits[0] != nil {
		f.bits = [2][]uint64{}
	}
}

// bytes is the memory the filter holds.
func (f *failFilter) bytes() int { return 2 * 8 * len(f.bits[0]) }
