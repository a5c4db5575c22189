package ackcore

// A FAIL is never lost (rule 3 of docs/semantics.md), not even at the
// bound. A FAIL for a root with no entry must make one, to be remembered
// until the root's INIT (which then reports Failed) or until it expires as
// an orphan (rule 6). At the bound that entry cannot be had like others:
//
//  1. FAILs may make entries beyond MaxPending, up to failReserve more
//     (Stats.FailsReserved counts them). The table is sized for it.
//  2. With the reserve used up too, the root goes into a filter: two
//     generations of a bit set (a Bloom filter with two probes), each
//     living two default timeouts, so a root stays in it between one and
//     two timeouts, like an orphan entry (Stats.FailsFiltered counts
//     them). While the filter holds anything, every INIT of a root
//     without a FAIL-flagged entry is checked against it; a hit reports
//     Failed{explicit}. A false positive fails an innocent root, which its
//     spout replays: a replay, never a lost FAIL. The filter is allocated
//     on first use and dropped when both generations are empty.
//
// While the filter holds anything the fast paths leave every INIT of a new
// root to step (so that it is checked), and folding applies messages one
// by one (a false positive must not depend on grouping).

// failReserveFor is the number of FAIL-only entries a shard with bound
// maxPending keeps beyond it: 1/64 of the bound, at least 16.
func failReserveFor(maxPending int) int { return max(16, maxPending/64) }

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

// filterBits is the filter's size in bits: a quarter of the bound, at
// least 2^12, a power of two.
func filterBits(maxPending int) int {
	b := 1 << 12
	for b < maxPending/4 {
		b <<= 1
	}
	return b
}

// active reports whether the filter holds anything.
func (f *failFilter) active() bool { return f.held[0]+f.held[1] > 0 }

// probes returns root's two bit positions.
func (f *failFilter) probes(h uint64) (uint64, uint64) {
	m := uint64(f.words*64 - 1)
	return h & m, h >> 32 & m
}

// add puts root, hashed to h, in the current generation.
func (f *failFilter) add(h uint64, nbits int) {
	if f.bits[0] == nil {
		f.words = nbits / 64
		f.bits = [2][]uint64{make([]uint64, f.words), make([]uint64, f.words)}
	}
	b := f.bits[f.gen&1]
	i, j := f.probes(h)
	b[i/64] |= 1 << (i % 64)
	b[j/64] |= 1 << (j % 64)
	f.held[f.gen&1]++
}

// has reports whether root, hashed to h, may be in the filter.
func (f *failFilter) has(h uint64) bool {
	i, j := f.probes(h)
	for g := range f.bits {
		if f.held[g] > 0 {
			b := f.bits[g]
			if b[i/64]&(1<<(i%64)) != 0 && b[j/64]&(1<<(j%64)) != 0 {
				return true
			}
		}
	}
	return false
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
