package netio

import (
	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/splitmix"
)

// pendTable is a host's table of roots in flight on the client: root ->
// packed value (task, INIT count, send time; see pendCount). It is a flat
// open-addressed table with linear probing and backward-shift deletion,
// so registering a root and resolving its outcome are a hash, a probe of
// one or two adjacent 16-byte slots and a store: no per-entry allocation,
// no tombstones, no Go map's group scan. Root 0 (never a valid root)
// marks an empty slot.
//
// Layout: a power-of-two array of {root, val} slots, 16 bytes each, kept
// at most half full (it doubles before an insert would pass that); it
// never shrinks, but reset (a lost host) starts it over small. Its size
// is bounded by the client's MaxPending: a host never has more roots
// pending than the client has in flight.
//
// Not safe for concurrent use: the host's mu guards it.
type pendTable struct {
	slots []pendSlot
	n     int  // occupied slots
	shift uint // 64 - log2(len(slots)): the hash's top bits index the table
	sink  uint64
}

// A pending-table value packs the root's local task (20 bits, up to
// ackcore.MaxTask), how many of its INITs await an outcome (12 bits: a
// root id reused before its earlier outcome came back), and the INIT's
// send time in ms since the client started (32 bits, for the latency of
// a lost root).
const (
	pendTaskMask   = ackcore.MaxTask
	pendCountShift = 20
	pendMaxCount   = 1<<12 - 1
	pendMsShift    = 32
)

func pendCount(v uint64) int { return int(v >> pendCountShift & pendMaxCount) }

type pendSlot struct{ root, val uint64 }

// pendMinSlots is the size a table starts at.
const pendMinSlots = 256

// home is root's first slot: Fibonacci hashing, whose top bits spread
// sequential roots (a counter) as well as random ones.
func (t *pendTable) home(root uint64) uint64 { return root * splitmix.Golden >> t.shift }

// slot returns the slot holding root, or, when root is absent, the empty
// slot where it would go (root field 0) — after growing the table if one
// more entry would fill it past half. The pointer is valid until the next
// call.
func (t *pendTable) slot(root uint64) *pendSlot {
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.home(root); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.root == root || s.root == 0 {
			return s
		}
	}
}

// insert stores val for root in s, an empty slot that slot returned.
func (t *pendTable) insert(s *pendSlot, root, val uint64) {
	s.root, s.val = root, val
	t.n++
}

// add registers one more INIT of root: a new entry val (task and send
// time, count 1), or the existing entry's count raised by one. It reports
// false, changing nothing, when root already counts pendMaxCount INITs.
func (t *pendTable) add(root, val uint64) bool {
	s := t.slot(root)
	if s.root == 0 {
		t.insert(s, root, val&^(pendMaxCount<<pendCountShift)|1<<pendCountShift)
		return true
	}
	if pendCount(s.val) >= pendMaxCount {
		return false
	}
	s.val += 1 << pendCountShift
	return true
}

// take resolves one INIT of root: it returns the entry's value and lowers
// its count, removing the entry at zero; ok is false when root is not
// pending.
func (t *pendTable) take(root uint64) (val uint64, ok bool) {
	i := t.find(root)
	if i < 0 {
		return 0, false
	}
	val = t.slots[i].val
	if pendCount(val) > 1 {
		t.slots[i].val -= 1 << pendCountShift
	} else {
		t.remove(i)
	}
	return val, true
}

// reserve makes room for extra more entries, so that no add among them
// grows the table (and moves lines touched for them).
func (t *pendTable) reserve(extra int) {
	for 2*(t.n+extra) > len(t.slots) {
		t.grow()
	}
}

// touch loads root's home slot and returns its root field, for the
// caller to fold into a sum it keeps (see sink): a batch's touches are
// independent loads, which the core overlaps, so that the adds or takes
// that follow find their lines in cache instead of missing one after
// another (a miss cost about 40 ns with a 10,000-root table in the
// loopback benchmark).
func (t *pendTable) touch(root uint64) uint64 {
	if len(t.slots) == 0 {
		return 0
	}
	return t.slots[t.home(root)].root
}

// find returns root's slot index, or -1.
func (t *pendTable) find(root uint64) int {
	if t.n == 0 {
		return -1
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.home(root); ; i = (i + 1) & mask {
		switch t.slots[i].root {
		case root:
			return int(i)
		case 0:
			return -1
		}
	}
}

// remove empties slot i and shifts back the entries after it that probed
// past it, so that every entry stays reachable from its home without
// tombstones.
func (t *pendTable) remove(i int) {
	mask := uint64(len(t.slots) - 1)
	hole := uint64(i)
	for j := (hole + 1) & mask; t.slots[j].root != 0; j = (j + 1) & mask {
		// The entry at j may fill the hole when the hole lies on its
		// probe path: from its home to j, cyclically.
		if (j-t.home(t.slots[j].root))&mask >= (j-hole)&mask {
			t.slots[hole] = t.slots[j]
			hole = j
		}
	}
	t.slots[hole] = pendSlot{}
	t.n--
}

func (t *pendTable) grow() {
	old := t.slots
	size := max(2*len(old), pendMinSlots)
	t.slots = make([]pendSlot, size)
	t.shift = uint(64 - log2(size))
	mask := uint64(size - 1)
	for _, s := range old {
		if s.root == 0 {
			continue
		}
		i := t.home(s.root)
		for t.slots[i].root != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

// each calls fn for every entry, in no particular order.
func (t *pendTable) each(fn func(root, val uint64)) {
	for _, s := range t.slots {
		if s.root != 0 {
			fn(s.root, s.val)
		}
	}
}

// reset empties the table and gives its memory back.
func (t *pendTable) reset() { *t = pendTable{} }

func log2(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}
