package ackcore

import (
	"github.com/xorack/xorack/internal/layout"
	"math/bits"
	"unsafe"
)

// Table geometry. See doc.go for the picture.
const (
	// maxLoadNum/maxLoadDen is the most slots a table fills at its bound:
	// the slot count is MaxPending*3/2 rounded up. At 24 bytes a slot that
	// is 36 bytes per pending root at the bound, and linear probes short
	// enough that 96% of hits end within four slots of home (random
	// churn at load 0.62, what a workload at its peak sees). (At 7/10,
	// 34.3 bytes, word count at P=10k ran 11% slower: longer shifts on
	// insert and delete.)
	maxLoadNum, maxLoadDen = 2, 3
)

// The entry's meta word. The high 32 bits (the "word"):
//
//	bit  31      flagInit   an INIT was seen: bits 19..0 are its spout task
//	bit  30      flagNear   the timer is in the near wheel: the low 32 bits
//	                        are its handle, and the wheel holds the deadline
//	bits 29..28  kind       how the start and the timeout are found (timing.go)
//	bits 27..25  xhi        bits 18..16 of the timing extension X (timing.go)
//	bits 24..20  dist       probe distance from home, saturating at distSat
//	bits 19..0   task       with flagInit: the spout task; without:
//	                        the orphan's owner and tag (bits 19..2,
//	                        owners.go, orphans.go), flagTomb (bit 1: a
//	                        drain, rules.go) and flagFailed (bit 0)
//
// The low 32 bits: the deadline tick modulo 2^32 (recovered by expand), or
// with flagNear the near-wheel handle.
const (
	flagInit   uint32 = 1 << 31
	flagNear   uint32 = 1 << 30
	flagFailed uint32 = 1 // without flagInit only: a FAIL arrived before the INIT (sticky)
	flagTomb   uint32 = 2 // without flagInit only: a drain, what a failed tree still owes (rules.go)
	taskMask   uint32 = MaxTask

	kindShift        = 28
	kindMask  uint32 = 3 << kindShift
	xhiShift         = 25
	xhiMask   uint32 = 7 << xhiShift

	// The entry's probe distance from its home slot, bits 24..20 of the
	// word, saturating at distSat: a saturated distance is recomputed from
	// the hash (Robin Hood insert and delete compare distances without
	// hashing otherwise). With the keyed hash at the 2/3 load bound a
	// distance of 31 is about as rare as none at all (the longest of a
	// million random or structured roots was 15 to 19).
	distShift        = 20
	distMask  uint32 = 0x1f << distShift
	distSat          = 0x1f
	distOne   uint64 = 1 << (32 + distShift) // one unit of distance in meta
)

// entry is one slot: the 20 bytes the acker needs per root (root, ack
// val, spout task; docs/semantics.md) plus flags and the deadline, 24
// bytes, no pointers.
type entry struct {
	key  uint64 // root id; 0 marks an empty slot (root ids are never 0)
	val  uint64 // ack val
	meta uint64 // word << 32 | deadline tick mod 2^32 (or near handle)
}

// entryBytes is unsafe.Sizeof(entry{}), kept as a constant for docs and
// figures; TestEntrySize checks it.
const entryBytes = 24

func (e *entry) word() uint32 { return uint32(e.meta >> 32) }

// storedDist is the distance field of e's word: its probe distance, or
// distSat for distSat and beyond.
func (e *entry) storedDist() uint64 { return uint64(e.word()&distMask) >> distShift }

// table is an open-addressed hash table of pending roots, keyed by root id,
// with linear probing over single slots and backward-shift deletion. It is
// owned by one Shard; nothing in it is safe for concurrent use.
//
// Invariants: every slot from an entry's home slot up to its own slot
// (going round the end) is occupied, so a lookup stops at the first empty
// slot; and each run of occupied slots is sorted by home (Robin Hood
// order: a probe distance grows by at most one from one slot to the next),
// so a delete shifts the entries after the hole back by one only up to an
// entry in its home slot, and an insert goes before the first entry of its
// run homed later, shifting the rest of the run forward by one. Each entry
// stores its distance, so neither hashes the entries it moves. No
// tombstones: the table never slows down with churn.
type table struct {
	e     []entry
	n     uint64 // len(e); any positive number (fast range reduction, not a mask)
	keys         // the hash keys (see mix), fixed at construction
	count int    // occupied slots
}

// tableSlots is the slot count for a bound: maxPending*3/2 rounded up, and
// room for the FAIL reserve beyond the bound plus one empty slot (so that
// an empty slot always ends a probe) in the smallest tables.
func tableSlots(maxPending int) int {
	return max((maxPending*maxLoadDen+maxLoadNum-1)/maxLoadNum, maxPending+failReserveFor(maxPending)+1)
}

func newTable(maxPending int, k keys) table {
	n := tableSlots(maxPending)
	return table{e: alignedEntries(n), n: uint64(n), keys: k}
}

// alignedEntries returns n zeroed entries starting on a cache-line
// boundary, so that every run of eight slots fills exactly three lines and
// a probe window's slots share as few lines as their offset allows. The
// allocator already page-aligns arrays past 32 KiB; smaller ones start at
// a multiple of 8 bytes, and one of the first eight slots is then
// line-aligned (24k mod 64 takes every multiple of 8).
func alignedEntries(n int) []entry {
	buf := make([]entry, n+layout.CacheLine/8-1)
	k := 0
	for uintptr(unsafe.Pointer(&buf[k]))%layout.CacheLine != 0 {
		k++
	}
	return buf[k : k+n : k+n]
}

// slots is the number of slots.
func (t *table) slots() int { return len(t.e) }

// bytes is the memory held by the slot array.
func (t *table) bytes() int { return len(t.e) * entryBytes }

// home is the slot a root hashes to: the high word of mix(root)*n
// (Lemire's fast range), so the slot count need not be a power of two.
// Shard.fastPath, Shard.homes and ackRun compute the same.
func (t *table) home(root uint64) uint64 {
	h, _ := bits.Mul64(mix(root, &t.keys), t.n)
	return h
}

// find returns the slot holding root and true, or the empty slot where the
// probe ended (where root would be inserted) and false. root must not be 0.
func (t *table) find(root uint64) (slot int, found bool) {
	i, n := t.home(root), t.n
	for {
		k := t.e[i].key
		if k == root {
			return int(i), true
		}
		if k == 0 {
			return int(i), false
		}
		if i++; i == n {
			i = 0
		}
	}
}

// distAt is the probe distance of the entry in slot j.
func (t *table) distAt(j uint64) uint64 {
	if d := t.e[j].storedDist(); d < distSat {
		return d
	}
	return dist(j, t.home(t.e[j].key), t.n)
}

// dist is how far slot j lies past slot h, going round the end of a table
// of n slots.
func dist(j, h, n uint64) uint64 {
	if j >= h {
		return j - h
	}
	return j + n - h
}

// dropEntry removes the entry in slot with what it keeps elsewhere: its
// near timer, its ext or side-map timing.
func (s *Shard) dropEntry(slot int) {
	e := &s.t.e[slot]
	if e.word()&flagNear != 0 {
		s.freeNear(uint32(e.meta))
	}
	s.dropTiming(e)
	s.removeSlot(slot)
}

// moveSide moves what the arrays beside the slots (ext, prog) hold for
// slot from to slot to, with the entry.
func (s *Shard) moveSide(to, from uint64) {
	if s.ext != nil {
		s.ext[to] = s.ext[from]
	}
	if s.prog != nil {
		s.prog[to] = s.prog[from]
	}
}

// removeSlot empties slot i and restores Robin Hood order: the entries
// after the hole move back one slot each, up to an empty slot or an entry
// in its home slot. ext moves with them.
func (s *Shard) removeSlot(i int) {
	t := &s.t
	es, n := t.e, t.n
	side := s.ext != nil || s.prog != nil // arrays beside the slots, moved with them
	hole := uint64(i)
	for {
		j := hole + 1
		if j == n {
			j = 0
		}
		e := &es[j]
		d := e.storedDist()
		if e.key == 0 || d == 0 {
			break
		}
		es[hole] = *e
		if side {
			s.moveSide(hole, j)
		}
		if d < distSat || t.distAt(hole) < distSat {
			es[hole].meta -= distOne
		}
		if int(j) == s.scan {
			s.rescan(&es[hole]) // moved behind a running pass
		}
		hole = j
	}
	es[hole] = entry{}
	t.count--
}

// shiftUp moves the entries in slots p up to z-1 (going round the end)
// one slot forward, into the empty slot z, adding one to each distance.
// ext moves with them.
func (s *Shard) shiftUp(p, z uint64) {
	es := s.t.e
	side := s.ext != nil || s.prog != nil // arrays beside the slots, moved with them
	for q := z; q != p; {
		pq := q - 1
		if q == 0 {
			pq = uint64(len(es)) - 1
		}
		es[q] = es[pq]
		if side {
			s.moveSide(q, pq)
		}
		if es[q].storedDist() < distSat {
			es[q].meta += distOne
		}
		q = pq
	}
}

// insertSlot inserts root, absent, whose probe ended at the empty slot z,
// and returns its slot: the first slot from home whose entry is homed
// later (a shorter distance than root would have there), after shifting
// the entries from there up to z forward by one. Shard.fastPath writes the
// same steps out inline.
func (s *Shard) insertSlot(root, z uint64) uint64 {
	t := &s.t
	es, n := t.e, t.n
	p := t.home(root)
	d := uint64(0)
	for ; p != z && t.distAt(p) >= d; d++ {
		if p++; p == n {
			p = 0
		}
	}
	s.shiftUp(p, z)
	if p > z && s.scan > 0 {
		s.rescan(&es[0]) // moved round the end, behind a running pass
	}
	es[p] = entry{key: root, meta: min(d, distSat) << (32 + distShift)}
	t.count++
	return p
}
