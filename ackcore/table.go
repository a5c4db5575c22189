package ackcore

import (
	"math/bits"
)

// Table geometry. See doc.go for the picture.
const (
	// maxLoadNum/maxLoadDen is the most slots a table fills at its bound:
	// the slot count is MaxPending*10/7 rounded up. At 24 bytes a slot that
	// is 34.3 bytes per pending root at the bound, and linear probes short
	// enough that most lookups read the root's home slot and stop.
	maxLoadNum, maxLoadDen = 7, 10
	// hashMul is the multiplier of the home hash: 2^64 divided by the
	// golden ratio, odd, so that (root^seed)*hashMul is a bijection whose
	// high bits depend on every bit of the root (Fibonacci hashing).
	hashMul = 0x9e3779b97f4a7c15
)

// The entry's meta word: the high 32 bits are task | flags, the low 32 bits
// the deadline tick (modulo 2^32), or, with flagNear, the entry's handle in
// the near wheel, which then holds the deadline.
const (
	flagInit   uint32 = 1 << 31 // an INIT was seen: the task is known
	flagFailed uint32 = 1 << 30 // a FAIL arrived before the INIT (sticky)
	flagCustom uint32 = 1 << 29 // start or timeout live in Shard.custom
	flagNear   uint32 = 1 << 28 // the timer is in the near wheel; the low word is its handle
	taskMask   uint32 = MaxTask
)

// entry is one slot: the 20 bytes of SEMANTICS.md (root, ack val, task)
// plus flags and the deadline, 24 bytes, no pointers.
type entry struct {
	key  uint64 // root id; 0 marks an empty slot (root ids are never 0)
	val  uint64 // ack val
	meta uint64 // word << 32 | deadline tick mod 2^32 (or near handle)
}

// entryBytes is unsafe.Sizeof(entry{}), kept as a constant for docs and
// figures; TestEntrySize checks it.
const entryBytes = 24

func (e *entry) word() uint32 { return uint32(e.meta >> 32) }

// table is an open-addressed hash table of pending roots, keyed by root id,
// with linear probing over single slots and backward-shift deletion. It is
// owned by one Shard; nothing in it is safe for concurrent use.
//
// Invariant: every slot from an entry's home slot up to its own slot (going
// round the end) is occupied. So a lookup stops at the first empty slot,
// which is also where an insert of a missing root goes; a delete pulls back
// the entries after the hole whose probe passed over it, until an empty
// slot: no tombstones, so the table never slows down with churn.
type table struct {
	e     []entry
	n     uint64 // len(e); any positive number (fast range reduction, not a mask)
	seed  uint64 // hash seed, fixed at construction
	count int    // occupied slots
}

func newTable(maxPending int, seed uint64) table {
	n := (uint64(maxPending)*maxLoadDen + maxLoadNum - 1) / maxLoadNum
	if n < uint64(maxPending)+1 {
		n = uint64(maxPending) + 1 // an empty slot always ends a probe
	}
	return table{e: make([]entry, n), n: n, seed: seed}
}

// slots is the number of slots.
func (t *table) slots() int { return len(t.e) }

// bytes is the memory held by the slot array.
func (t *table) bytes() int { return len(t.e) * entryBytes }

// home is the slot a root hashes to: the high word of hash*n (Lemire's fast
// range) of a seeded multiplicative hash, so the slot count need not be a
// power of two. Shard.applyChunk and homes write it out inline.
func (t *table) home(root uint64) uint64 {
	h, _ := bits.Mul64((root^t.seed)*hashMul, t.n)
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

// between reports whether the home slot h lies cyclically in (lo, hi]: an
// entry at slot hi whose home is there may not move back to lo.
func between(h, lo, hi uint64) bool {
	if lo <= hi {
		return lo < h && h <= hi
	}
	return lo < h || h <= hi
}
