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
	metaOverOne  = 1 << groupSlots   // high 8 bits: overflow count, +1
	metaOverMax  = 0xff              // a saturated count is sticky
)

// table is an open-addressed hash table of pending roots, keyed by root id,
// probed linearly by groups of eight slots. It is owned by one Shard;
// nothing in it is safe for concurrent use.
//
// Each group's metadata holds an occupancy mask and an overflow count: the
// number of entries stored past this group whose probe passed through it
// (the F14 scheme). A lookup that misses in a group with a zero overflow
// count stops there; an insert finds the first group with a free slot from
// the occupancy masks alone and bumps the counts it passes; a delete clears
// the slot and decrements the counts along its probe path. So deletes leave
// no tombstones and the table does not slow down over time, and entries
// never move once placed: slot i's timer stays handle i of the wheel.
type table struct {
	// kv holds each group's keys, then its vals: 128 bytes per group,
	// aligned, so a root and its ack val share a page and sit in adjacent
	// lines. Keys are root ids; 0 marks an empty slot (root ids are never 0).
	kv      []uint64
	words   []uint32 // task | flags
	meta    []uint16 // per group: overflow count << 8 | occupancy mask
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
// a group (one cache line) and moves on only while the group's overflow
// count says some entry went past it. Shard.applyChunk writes the same
// probe out inline for the hot path.
func (t *table) find(root uint64) (slot int, found bool) {
	return t.findFrom(root, t.home(root))
}

func (t *table) findFrom(root, g uint64) (slot int, found bool) {
	for left := t.ngroups; ; left-- {
		if m := matchGroup(t.groupKeys(g), root); m != 0 {
			return int(g)*groupSlots + bits.TrailingZeros(m)&(groupSlots-1), true
		}
		// Stop where nothing went past, or after one lap (in a small, busy
		// table every group may have overflow).
		if t.meta[g] < metaOverOne || left == 1 {
			return -1, false
		}
		if g++; g == t.ngroups {
			g = 0
		}
	}
}

// matchGroup returns a bit mask of the slots in kg holding key. The eight
// compares run without branches (a key's position in its group is random,
// so a branch per key would mispredict on most lookups): the portable form
// of one vector compare over the contiguous keys.
func matchGroup(kg *[groupSlots]uint64, key uint64) uint {
	return b2u(kg[0] == key) | b2u(kg[1] == key)<<1 | b2u(kg[2] == key)<<2 | b2u(kg[3] == key)<<3 |
		b2u(kg[4] == key)<<4 | b2u(kg[5] == key)<<5 | b2u(kg[6] == key)<<6 | b2u(kg[7] == key)<<7
}

// insert stores root (absent) in the first free slot on its probe path,
// counting the overflow in each full group it passes, and returns the slot.
// The caller guarantees a free slot exists (count < MaxPending < slots).
func (t *table) insert(root uint64) int { return t.insertFrom(root, t.home(root)) }

// insertFrom is insert for a root whose home group g the caller has.
func (t *table) insertFrom(root, g uint64) int {
	for t.meta[g]&metaFullMask == metaFullMask {
		if t.meta[g]>>8 != metaOverMax {
			t.meta[g] += metaOverOne
		}
		if g++; g == t.ngroups {
			g = 0
		}
	}
	i := bits.TrailingZeros16(^t.meta[g])
	t.meta[g] |= 1 << i
	slot := int(g)*groupSlots + i
	t.kv[ki(slot)] = root
	t.count++
	return slot
}

// remove empties slot s and takes its overflow back from the groups its
// probe passed. Nothing moves.
func (t *table) remove(s int) { t.removeFrom(s, t.home(t.kv[ki(s)])) }

// removeFrom is remove for an entry whose home group g the caller has.
func (t *table) removeFrom(s int, g uint64) {
	t.kv[ki(s)] = 0
	t.count--
	sg := uint64(s / groupSlots)
	t.meta[sg] &^= 1 << (s % groupSlots)
	for g != sg {
		if t.meta[g]>>8 != metaOverMax {
			t.meta[g] -= metaOverOne
		}
		if g++; g == t.ngroups {
			g = 0
		}
	}
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
