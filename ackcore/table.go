package ackcore

import (
	"math/bits"
	"unsafe"
)

// Table geometry. See doc.go for the picture.
const (
	// groupSlots is the number of slots probed together: eight 8-byte keys
	// fill exactly one 64-byte cache line, so one probe step reads one line
	// and compares eight keys (one AVX-512 compare, or eight scalar ones the
	// CPU runs in parallel).
	groupSlots = 8
	// cacheLineSize is the alignment of every slot array, so that a group's
	// keys never straddle two lines. kv is aligned to two lines (128 bytes,
	// a group's keys and vals): the pair adjacent-line prefetchers fetch.
	cacheLineSize = 64
	// maxLoadNum/maxLoadDen is the most slots a table fills at its bound:
	// the slot count is MaxPending*8/7 rounded up to whole groups. Probing
	// whole groups keeps probe sequences short even at 7/8 load (a group
	// overflows only when nine keys hash to it and its neighbours).
	maxLoadNum, maxLoadDen = 7, 8
)

// The entry's 32-bit word: task id in the low 29 bits, flags above.
const (
	flagInit   uint32 = 1 << 31 // an INIT was seen: the task is known
	flagFailed uint32 = 1 << 30 // a FAIL arrived before the INIT (sticky)
	flagCustom uint32 = 1 << 29 // start or timeout live in Shard.custom
	taskMask   uint32 = MaxTask
)

// Group metadata: one uint16 per group, in a small array of its own (a
// million slots need 250 KiB of it, which stays in L2).
const (
	metaFullMask = 1<<groupSlots - 1 // low 8 bits: which slots hold a key
	metaDispOne  = 1 << groupSlots   // high 8 bits: which keys are not in their home group
)

// table is an open-addressed hash table of pending roots, keyed by root id,
// probed linearly by groups of eight slots, with backward-shift deletion.
// It is owned by one Shard; nothing in it is safe for concurrent use.
//
// Invariant: an entry in group p with home group h finds every group from
// h up to p-1 full. So a lookup stops at the first group with a free slot,
// and an insert takes the first free slot from home on. A delete leaves a
// hole and then pulls back, group by group, an entry whose probe passed
// the hole's group (only entries flagged displaced, not in their home
// group, can have), until a group that had room ends the chain: no
// tombstones, so the table does not slow down with churn. Moved entries
// take their timer with them (Wheel.Move), since slot i's timer is handle i.
type table struct {
	// kv holds each group's keys, then its vals: 128 bytes per group,
	// aligned, so a root and its ack val share a page and sit in adjacent
	// lines. Keys are root ids; 0 marks an empty slot (root ids are never 0).
	kv      []uint64
	words   []uint32 // task | flags
	meta    []uint16 // per group: displaced mask << 8 | occupancy mask
	ngroups uint64   // number of groups; any positive number (fast range reduction, not a mask)
	seed    uint64   // hash seed, fixed at construction
	count   int      // occupied slots
}

func newTable(maxPending int, seed uint64) table {
	slots := (uint64(maxPending)*maxLoadDen + maxLoadNum - 1) / maxLoadNum
	ngroups := (slots + groupSlots - 1) / groupSlots
	if ngroups < 2 {
		ngroups = 2 // keep one group free at the bound even for tiny tables
	}
	n := int(ngroups * groupSlots)
	return table{
		kv:      alignedUint64s(2 * n),
		words:   alignedUint32s(n),
		meta:    make([]uint16, ngroups),
		ngroups: ngroups,
		seed:    seed,
	}
}

// slots is the number of slots, and so the number of timer handles.
func (t *table) slots() int { return len(t.kv) / 2 }

// ki and vi are the indexes in kv of slot s's key and val.
func ki(s int) int { return s>>3<<4 | s&7 }
func vi(s int) int { return s>>3<<4 | 8 | s&7 }

// groupKeys is group g's eight keys.
func (t *table) groupKeys(g uint64) *[groupSlots]uint64 {
	return (*[groupSlots]uint64)(t.kv[g*2*groupSlots:])
}

// bytes is the memory held by the slot arrays.
func (t *table) bytes() int { return t.slots()*(8+8+4) + len(t.meta)*2 }

// home is the group a root hashes to. The mix is two rounds of
// multiply-xorshift, seeded, so that sequential or adversarial root ids
// still spread; the group is the high word of hash*ngroups (Lemire's fast
// range), which works for any group count.
func (t *table) home(root uint64) uint64 {
	h := (root ^ t.seed) * 0xbf58476d1ce4e5b9
	h ^= h >> 31
	h *= 0x94d049bb133111eb
	g, _ := bits.Mul64(h, t.ngroups)
	return g
}

// find returns the slot holding root, if any. It compares the eight keys of
// a group (one cache line) and moves on only while the group is full.
// Shard.applyChunk writes the same probe out inline for the hot path.
func (t *table) find(root uint64) (slot int, found bool) {
	return t.findFrom(root, t.home(root))
}

func (t *table) findFrom(root, g uint64) (slot int, found bool) {
	for left := t.ngroups; left > 0; left-- {
		if m := matchGroup(t.groupKeys(g), root); m != 0 {
			return int(g)*groupSlots + bits.TrailingZeros(m)&(groupSlots-1), true
		}
		if t.meta[g]&metaFullMask != metaFullMask {
			break
		}
		if g++; g == t.ngroups {
			g = 0
		}
	}
	return -1, false
}

// matchGroup returns a bit mask of the slots in kg holding key. The eight
// compares run without branches (a key's position in its group is random,
// so a branch per key would mispredict on most lookups): the portable form
// of one vector compare over the contiguous keys.
func matchGroup(kg *[groupSlots]uint64, key uint64) uint {
	return b2u(kg[0] == key) | b2u(kg[1] == key)<<1 | b2u(kg[2] == key)<<2 | b2u(kg[3] == key)<<3 |
		b2u(kg[4] == key)<<4 | b2u(kg[5] == key)<<5 | b2u(kg[6] == key)<<6 | b2u(kg[7] == key)<<7
}

// insertFrom stores root (absent) in the first free slot on its probe path
// from its home group h, and returns the slot. The caller guarantees a free
// slot exists (count < MaxPending < slots).
func (t *table) insertFrom(root, h uint64) int {
	g := h
	for t.meta[g]&metaFullMask == metaFullMask {
		if g++; g == t.ngroups {
			g = 0
		}
	}
	i := bits.TrailingZeros16(^t.meta[g])
	t.meta[g] |= 1 << i
	if g != h {
		t.meta[g] |= metaDispOne << i
	}
	slot := int(g)*groupSlots + i
	t.kv[ki(slot)] = root
	t.count++
	return slot
}

// mover relocates whatever else is keyed by slot when an entry moves.
type mover interface{ Move(from, to uint32) }

// remove empties slot s and restores the invariant by backward shift (see
// table). Only displaced entries are candidates, so most groups cost one
// mask test, not eight hashes.
func (t *table) remove(s int, timers mover) {
	t.kv[ki(s)] = 0
	t.count--
	hole := s
	holeG := uint64(s / groupSlots)
	t.meta[holeG] &^= (1 | metaDispOne) << (s % groupSlots)
	for g := holeG; ; {
		if g++; g == t.ngroups {
			g = 0
		}
		m := t.meta[g]
		for disp := m >> groupSlots; disp != 0; disp &= disp - 1 {
			i := bits.TrailingZeros16(disp)
			from := int(g)*groupSlots + i
			k := t.kv[ki(from)]
			h := t.home(k)
			if !passedOver(h, holeG, g, t.ngroups) {
				continue
			}
			t.kv[ki(hole)], t.kv[vi(hole)], t.words[hole] = k, t.kv[vi(from)], t.words[from]
			t.kv[ki(from)] = 0
			hi := hole % groupSlots
			t.meta[holeG] |= 1 << hi
			if holeG != h {
				t.meta[holeG] |= metaDispOne << hi
			}
			t.meta[g] &^= (1 | metaDispOne) << i
			timers.Move(uint32(from), uint32(hole))
			hole, holeG = from, g
			break
		}
		if m&metaFullMask != metaFullMask {
			return // g had room before: nothing beyond it passed the hole
		}
	}
}

// passedOver reports whether the probe of an entry with home h, stored in
// group g, went through group hg: the distance from h to g is at least the
// distance from hg to g, around the ring of groups.
func passedOver(h, hg, g, n uint64) bool {
	dh := g - h
	if g < h {
		dh += n
	}
	dg := g - hg
	if g < hg {
		dg += n
	}
	return dh >= dg
}

// alignedUint64s returns n zeroed uint64s whose first element starts a
// 128-byte block (two cache lines).
func alignedUint64s(n int) []uint64 {
	const align = 2 * cacheLineSize
	buf := make([]uint64, n+align/8)
	off := int((align - uintptr(unsafe.Pointer(&buf[0]))%align) % align / 8)
	return buf[off : off+n : off+n]
}

// alignedUint32s returns n zeroed uint32s whose first element starts a cache line.
func alignedUint32s(n int) []uint32 {
	const per = cacheLineSize / 4
	buf := make([]uint32, n+per)
	off := int((cacheLineSize - uintptr(unsafe.Pointer(&buf[0]))%cacheLineSize) % cacheLineSize / 4)
	return buf[off : off+n : off+n]
}
