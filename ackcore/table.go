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
	// keys never straddle two lines.
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

// table is an open-addressed hash table of pending roots, keyed by root id,
// probed linearly by groups of eight slots, with backward-shift deletion.
// It is owned by one Shard; nothing in it is safe for concurrent use.
//
// Slot i of the table is keys[i], vals[i], words[i]; the timer of the entry
// in slot i is handle i of the shard's timer wheel, which is why every move
// of an entry also moves its timer.
type table struct {
	keys    []uint64 // root ids; 0 marks an empty slot (root ids are never 0)
	vals    []uint64 // ack vals
	words   []uint32 // task | flags
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
		keys:    alignedUint64s(n),
		vals:    alignedUint64s(n),
		words:   alignedUint32s(n),
		ngroups: ngroups,
		seed:    seed,
	}
}

// slots is the number of slots, and so the number of timer handles.
func (t *table) slots() int { return len(t.keys) }

// bytes is the memory held by the slot arrays.
func (t *table) bytes() int { return len(t.keys) * (8 + 8 + 4) }

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

// find returns the slot holding root, or, when root is absent, the slot an
// insert of root must use (the first empty slot on its probe sequence).
func (t *table) find(root uint64) (slot int, found bool) {
	g := t.home(root)
	for {
		kg := (*[groupSlots]uint64)(t.keys[g*groupSlots:])
		empty := -1
		for i, k := range kg {
			if k == root {
				return int(g)*groupSlots + i, true
			}
			if k == 0 && empty < 0 {
				empty = i
			}
		}
		if empty >= 0 {
			return int(g)*groupSlots + empty, false
		}
		if g++; g == t.ngroups {
			g = 0
		}
	}
}

// mover relocates whatever else is keyed by slot when an entry moves.
type mover interface{ Move(from, to uint32) }

// remove empties slot s and restores the probe invariant by backward shift:
// an entry in a later group whose probe sequence passed over s's group is
// moved into the hole, and so on with the hole it leaves, until a group that
// was not full ends the chain. No tombstones are left, so the table never
// slows down with deletes.
func (t *table) remove(s int, timers mover) {
	t.keys[s] = 0
	t.count--
	hole := s
	holeG := uint64(s / groupSlots)
	g := holeG
	for {
		if g++; g == t.ngroups {
			g = 0
		}
		kg := (*[groupSlots]uint64)(t.keys[g*groupSlots:])
		full := true
		cand := -1
		for i, k := range kg {
			if k == 0 {
				full = false
				continue
			}
			if cand < 0 && t.passedOver(k, holeG, g) {
				cand = i
			}
		}
		if cand >= 0 {
			from := int(g)*groupSlots + cand
			t.keys[hole], t.vals[hole], t.words[hole] = t.keys[from], t.vals[from], t.words[from]
			t.keys[from] = 0
			timers.Move(uint32(from), uint32(hole))
			hole, holeG = from, g
		}
		if !full {
			return
		}
	}
}

// passedOver reports whether the probe sequence of key, found in group g,
// went through group hg: the distance from key's home to g is at least the
// distance from hg to g (distances taken around the ring of groups).
func (t *table) passedOver(key, hg, g uint64) bool {
	h := t.home(key)
	dh := g - h
	if g < h {
		dh += t.ngroups
	}
	dg := g - hg
	if g < hg {
		dg += t.ngroups
	}
	return dh >= dg
}

// alignedUint64s returns n zeroed uint64s whose first element starts a cache line.
func alignedUint64s(n int) []uint64 {
	const per = cacheLineSize / 8
	buf := make([]uint64, n+per)
	off := int((cacheLineSize - uintptr(unsafe.Pointer(&buf[0]))%cacheLineSize) % cacheLineSize / 8)
	return buf[off : off+n : off+n]
}

// alignedUint32s returns n zeroed uint32s whose first element starts a cache line.
func alignedUint32s(n int) []uint32 {
	const per = cacheLineSize / 4
	buf := make([]uint32, n+per)
	off := int((cacheLineSize - uintptr(unsafe.Pointer(&buf[0]))%cacheLineSize) % cacheLineSize / 4)
	return buf[off : off+n : off+n]
}
