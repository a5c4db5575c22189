package ackcore

import (
	"math/bits"
	"unsafe"

	"github.com/xorack/xorack/internal/layout"
)

// Table geometry. See doc.go for the picture.
const (
	// groupSlots is the slots of a group: fifteen, whose tags and the
	// group's overflow count fill one 16-byte control word.
	groupSlots = 15
	// maxLoadNum/maxLoadDen is the most slots a table fills at its bound:
	// the slot count is MaxPending*4/3 rounded up to whole groups. At 24
	// bytes a slot and 16 bytes of control per group (25.07 bytes a
	// slot) that is 33.4 bytes per pending root at the bound, and about
	// 98% of lookups find their root in the home group or the next, which
	// ackRun compares at once.
	maxLoadNum, maxLoadDen = 3, 4
	// Bounds up to sparseMaxPending fill at most sparseLoadNum/
	// sparseLoadDen of their slots (MaxPending*10/7): 35.8 bytes per
	// pending root at the bound, 2.4 more, under 40 KB in all. Fewer INITs
	// then meet a home group and a next that entries passed (the probe
	// that reads on, with the branches it mispredicts), and fewer lookups
	// a false tag match: on the word count at 10,000 roots pending
	// ackRun mispredicts 0.35 branches a message under callgrind (0.39
	// at 11/15, 0.42 at 3/4) and applies about 1.05x the messages a
	// second it did at 11/15. Past the bound the bytes a root weigh more
	// than a table that small makes up for.
	sparseMaxPending             = 1 << 14
	sparseLoadNum, sparseLoadDen = 7, 10
	// overflowSticky is an overflow count that has saturated: it is never
	// decremented again (see table).
	overflowSticky = 0xff
	// sentinelTag fills the control word after the last group: no empty
	// slot and a count that never says nothing passed, so that the pair
	// of groups ackRun compares at once may run past the end. A root
	// whose tag is 0xff matches its tag bytes: those name the padding
	// slots (padSlots), whose keys are no root's.
	sentinelTag = 0xff
)

// The entry's meta word. The high 32 bits (the "word"):
//
//	bit  31      flagInit   an INIT was seen: bits 19..0 are its spout task
//	bit  30      flagNear   the timer is in the near wheel: the low 32 bits
//	                        are its handle, and the wheel holds the deadline
//	bits 29..28  kind       how the start and the timeout are found (timing.go)
//	bits 27..25  xhi        bits 18..16 of the timing extension X (timing.go)
//	bits 24..20  dist       groups from its home group, saturating at distSat
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

	// The entry's distance in groups from its home group, bits 24..20 of
	// the word, saturating at distSat: a delete walks back that many
	// groups to take the entry out of their overflow counts, recomputing
	// a saturated distance from the hash. Nearly every entry is in its
	// home group (distance 0).
	distShift            = 20
	distMask      uint32 = 0x1f << distShift
	distSat              = 0x1f
	metaDistShift        = 32 + distShift // the distance's shift in meta
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

// groupBytes is the size of a group's control word.
const groupBytes = 16

// padSlots is the empty entries that follow the last slot, outside the
// table's slice: ackRun predicts a slot up to two groups past a home group
// and compares its key before it knows (ackrun_amd64.h, STAGE2), which
// past the last group reads these (key 0, never a root's). Nothing writes
// them.
const padSlots = 16

func (e *entry) word() metaWord { return metaWord(e.meta >> 32) }

// storedDist is the distance field of e's word: its distance in groups, or
// distSat for distSat and beyond.
func (e *entry) storedDist() uint64 { return uint64(uint32(e.word())&distMask) >> distShift }

// metaWord is an entry's word, the high 32 bits of meta, laid out above
// (and a cur's copy of it, rules.go). Its task bits mean one thing with
// flagInit and another without: read them through the accessor for the
// meaning wanted, not through masks. (ackRun, in assembly, uses the
// constants themselves, from go_asm.h.)
type metaWord uint32

// initWord is the word of an entry whose INIT was seen, from spout task.
func initWord(task uint32) metaWord { return metaWord(flagInit | task) }

// meaning is w's flagInit and task bits: what a cur holds of it.
func (w metaWord) meaning() metaWord { return w & metaWord(flagInit|taskMask) }

// tableBits is the rest of w: flagNear, the timing kind and X's high
// bits, the distance; the table's, which a cur leaves alone.
func (w metaWord) tableBits() metaWord { return w &^ metaWord(flagInit|taskMask) }

// orphanFlags is an orphan's flagTomb and flagFailed, without its owner
// and tag.
func (w metaWord) orphanFlags() metaWord { return w & metaWord(flagTomb|flagFailed) }

// inited says an INIT was seen: the task bits are its spout task.
func (w metaWord) inited() bool { return uint32(w)&flagInit != 0 }

// spoutTask is the spout task of an entry whose INIT was seen.
func (w metaWord) spoutTask() uint32 { return uint32(w) & taskMask }

// orphanBits are the task bits of an orphan (no INIT seen): its owner and
// tag, flagTomb and flagFailed.
func (w metaWord) orphanBits() uint32 { return uint32(w) & taskMask }

// isDrain says the entry is a drain: an orphan that a failed tree still
// owes (rules.go).
func (w metaWord) isDrain() bool { return uint32(w)&(flagInit|flagTomb) == flagTomb }

// failedEarly says a FAIL arrived before the INIT (an orphan's sticky
// flagFailed).
func (w metaWord) failedEarly() bool { return uint32(w)&(flagInit|flagFailed) == flagFailed }

// near says the timer is in the near wheel: the low 32 bits of meta are
// its handle.
func (w metaWord) near() bool { return uint32(w)&flagNear != 0 }

// kind is the timing kind (timing.go).
func (w metaWord) kind() uint32 { return (uint32(w) & kindMask) >> kindShift }

// completesPlain says the entry's INIT was seen, its timing is the
// default and it has no near timer: what the fast paths complete
// themselves.
func (w metaWord) completesPlain() bool {
	return uint32(w)&(flagInit|kindMask|flagNear) == flagInit
}

// group is a group's control word: bytes 0..14 are the tags of its
// fifteen slots (0: empty), byte 15 its overflow count. One more word
// follows the last group, all sentinelTag (its count too, so that it
// never says nothing passed).
type group struct{ lo, hi uint64 }

// table is an open-addressed hash table of pending roots, keyed by root
// id, in groups of fifteen slots probed group by group (linear probing
// over groups). It is owned by one Shard; nothing in it is safe for
// concurrent use.
//
// A root hashes to a home group and an 8-bit tag (never 0). Each group has
// a 16-byte control word beside the slots: the tags of its fifteen slots
// (0 for an empty slot) and an overflow count, the number of entries
// whose home is an earlier group and that live in a later one (entries
// that passed this group because it was full when they were inserted).
// A lookup compares the root's tag with the fifteen tags at once, compares
// keys only where a tag matches, and moves on to the next group only while
// the overflow count is not 0; an insert takes the first empty slot from
// the home group on and counts itself into the groups it passed; a delete
// empties its slot and counts itself out of them. Entries never move, so
// there are no shifts, and no tombstones: the counts are exact, so the
// table never slows down with churn. A count that reaches overflowSticky
// (255 entries passing one group, which a keyed hash at this load never
// gives) stays there for good: lookups then read on past it, which is
// slower but never wrong.
type table struct {
	e     []entry // ng*groupSlots slots; slot g*groupSlots+i is slot i of group g
	ctrl  []group // ng control words and the sentinel
	ng    uint64  // groups; any positive number (fast range reduction, not a mask)
	n     uint64  // len(e)
	keys          // the hash keys (see mix), fixed at construction
	count int     // occupied slots
}

// tableGroups is the group count for a bound: maxPending*4/3 slots
// (maxPending*10/7 up to sparseMaxPending) rounded up to whole groups,
// and room for the FAIL reserve beyond the bound plus one empty slot in
// the smallest tables.
func tableGroups(maxPending int) int {
	num, den := maxLoadNum, maxLoadDen
	if maxPending <= sparseMaxPending {
		num, den = sparseLoadNum, sparseLoadDen
	}
	slots := max((maxPending*den+num-1)/num, maxPending+failReserveFor(maxPending)+1)
	return (slots + groupSlots - 1) / groupSlots
}

// tableSlots is the slot count for a bound.
func tableSlots(maxPending int) int { return tableGroups(maxPending) * groupSlots }

func newTable(maxPending int, k keys) table {
	ng := tableGroups(maxPending)
	return table{e: alignedEntries(ng * groupSlots), ctrl: alignedGroups(ng), ng: uint64(ng), n: uint64(ng * groupSlots), keys: k}
}

// alignedEntries returns n zeroed entries starting on a cache-line
// boundary, so that every run of eight slots fills exactly three lines,
// with padSlots empty entries after them, outside the slice. The allocator
// already page-aligns arrays past 32 KiB; smaller ones start at a multiple
// of 8 bytes, and one of the first eight slots is then line-aligned (24k
// mod 64 takes every multiple of 8).
func alignedEntries(n int) []entry {
	return lineAligned[entry](n+padSlots, layout.CacheLine/8-1)[:n:n]
}

// alignedGroups returns n zeroed control words and the sentinel after
// them, starting on a cache-line boundary, so that no control word
// straddles two lines.
func alignedGroups(n int) []group {
	g := lineAligned[group](n+1, layout.CacheLine/groupBytes-1)[: n+1 : n+1]
	g[n] = group{lowBits * sentinelTag, lowBits * sentinelTag}
	return g
}

// lineAligned returns at least n zeroed T from a cache-line boundary:
// it allocates slack T more, and starts at the first of them on a
// boundary (the callers say why one of the first slack+1 is).
func lineAligned[T any](n, slack int) []T {
	buf := make([]T, n+slack)
	k := 0
	for uintptr(unsafe.Pointer(&buf[k]))%layout.CacheLine != 0 {
		k++
	}
	return buf[k:]
}

// slots is the number of slots.
func (t *table) slots() int { return len(t.e) }

// bytes is the memory held by the slots, their padding and the control
// words.
func (t *table) bytes() int { return (len(t.e)+padSlots)*entryBytes + len(t.ctrl)*groupBytes }

// hashOf is a root's home group and tag: the high word of mix(root)*ng
// (Lemire's fast range), so the group count need not be a power of two,
// and tagOf the low word (the next bits of the product). Shard.fastPath,
// Shard.homes and ackRun compute the same.
func (t *table) hashOf(root uint64) (g uint64, tag uint8) {
	g, lo := bits.Mul64(mix(root, &t.keys), t.ng)
	return g, tagOf(lo)
}

// tagOf is the tag for the low word of the fast-range product: its top
// byte, 0 taken as 1 (an empty slot's).
func tagOf(lo uint64) uint8 {
	tag := uint8(lo >> 56)
	return tag + b2u8(tag == 0)
}

// home is root's home group.
func (t *table) home(root uint64) uint64 {
	g, _ := t.hashOf(root)
	return g
}

// tags returns the control bytes of group g.
func (t *table) tags(g uint64) *[groupBytes]byte {
	return (*[groupBytes]byte)(unsafe.Pointer(&t.ctrl[g]))
}

// overflow is group g's overflow count.
func (t *table) overflow(g uint64) uint8 { return uint8(t.ctrl[g].hi >> 56) }

// next is the group after g, going round the end.
func (t *table) next(g uint64) uint64 {
	if g++; g == t.ng {
		return 0
	}
	return g
}

// SWAR byte matching over a control word's two halves.
const (
	lowBits  = 0x0101010101010101
	low7Bits = 0x7f7f7f7f7f7f7f7f
	highBits = 0x8080808080808080
	hiTags   = 0x0080808080808080 // the high half's tag bytes (byte 15 is the count)
)

// gatherHigh is the multiplier that gathers the high bits of a word's eight
// bytes, shifted down to bits 0, 8, ..., 56, into its top byte (bit 8k to
// bit 56+k; no two partial products meet, so nothing carries).
const gatherHigh = 0x0102040810204080

// tagMask has bit i set for each slot i (0..14) of group c whose tag is
// the byte broadcast in b (lowBits*tag): both halves matched at once and
// packed into one mask, so that one loop without a data-dependent branch
// between the halves walks the candidates in slot order.
func tagMask(c *group, b uint64) uint64 {
	lo := zeroBytes(c.lo^b) >> 7 * gatherHigh >> 56
	hi := (zeroBytes(c.hi^b) & hiTags) >> 7 * gatherHigh >> 56
	return lo | hi<<8
}

// zeroBytes has the high bit of each zero byte of x set, and no other bit
// (exact: the carry of one byte's sum cannot reach the next).
func zeroBytes(x uint64) uint64 { return ^((x&low7Bits + low7Bits) | x) & highBits }

// lookup returns the slot holding root and true, or false when root is
// not in the table: the candidates of each group from g, root's home, on
// (b is root's tag broadcast to every byte, lowBits*tag), while the
// group's overflow count says entries passed it. Small enough to inline
// into fastPath's loop.
func (t *table) lookup(root, g, b uint64) (uint64, bool) {
	for h := g; ; {
		c := &t.ctrl[h]
		for mm := tagMask(c, b); mm != 0; mm &= mm - 1 {
			if x := h*groupSlots + uint64(bits.TrailingZeros64(mm)); t.e[x].key == root {
				return x, true
			}
		}
		if c.hi>>56 == 0 {
			return 0, false // no entry passed this group: not there
		}
		if h++; h == t.ng {
			h = 0
		}
		if h == g {
			return 0, false // every group read (never at the bound's load)
		}
	}
}

// find returns the slot holding root and true, or the first empty slot
// from root's home group on (where root would be inserted) and false.
// root must not be 0.
func (t *table) find(root uint64) (slot int, found bool) {
	g, tag := t.hashOf(root)
	if j, ok := t.lookup(root, g, lowBits*uint64(tag)); ok {
		return int(j), true
	}
	z, pos := t.firstEmpty(g)
	return int(z*groupSlots + pos), false
}

// firstEmpty returns the first empty slot from group g on, as its group z
// and its place pos in z. The table always has one: its slots exceed the
// bound and the FAIL reserve.
func (t *table) firstEmpty(g uint64) (z, pos uint64) {
	for z = g; ; {
		c := &t.ctrl[z]
		if el := zeroBytes(c.lo); el != 0 {
			return z, uint64(bits.TrailingZeros64(el)) >> 3
		}
		if eh := zeroBytes(c.hi) & hiTags; eh != 0 {
			return z, 8 + uint64(bits.TrailingZeros64(eh))>>3
		}
		if z++; z == t.ng {
			z = 0
		}
	}
}

// groupDist is how many groups g lies past h, going round the end.
func (t *table) groupDist(g, h uint64) uint64 {
	if g >= h {
		return g - h
	}
	return g + t.ng - h
}

// homeOf is the home group of the entry in slot i.
func (t *table) homeOf(i uint64) uint64 {
	e := &t.e[i]
	d := e.storedDist()
	if d == distSat {
		return t.home(e.key)
	}
	g := i / groupSlots
	if g < d { // round the end
		g += t.ng
	}
	return g - d
}

// countOverflow adds delta (+1 or -1) to the overflow counts of the groups
// from h up to g (not g), leaving sticky counts alone.
func (t *table) countOverflow(h, g uint64, delta uint64) {
	for ; h != g; h = t.next(h) {
		c := &t.ctrl[h]
		if uint8(c.hi>>56) != overflowSticky {
			c.hi += delta << 56
		}
	}
}

// dropEntry removes the entry in slot with what it keeps elsewhere: its
// near timer, its ext or side-map timing.
func (s *Shard) dropEntry(slot int) {
	e := &s.t.e[slot]
	if e.word().near() {
		s.freeNear(uint32(e.meta))
	}
	s.dropTiming(e)
	s.removeSlot(slot)
}

// removeSlot empties slot i: its tag and its entry, and, for an entry
// outside its home group, its place in the overflow counts of the groups
// it passed.
func (s *Shard) removeSlot(i int) {
	t := &s.t
	g := uint64(i) / groupSlots
	if t.e[i].storedDist() != 0 {
		t.countOverflow(t.homeOf(uint64(i)), g, ^uint64(0))
	}
	t.tags(g)[uint64(i)-g*groupSlots] = 0
	t.e[i] = entry{}
	t.count--
}

// insertSlot inserts root, absent, at z, the first empty slot from its
// home group on (what find returned), and returns z: it sets z's tag,
// counts the entry into the overflow counts of the groups it passed, and
// writes the key and the distance. Shard.fastPath and ackRun write the
// same steps out inline.
func (s *Shard) insertSlot(root, z uint64) uint64 {
	t := &s.t
	h, tag := t.hashOf(root)
	g := z / groupSlots
	d := t.groupDist(g, h)
	if d != 0 {
		t.countOverflow(h, g, 1)
	}
	t.tags(g)[z-g*groupSlots] = tag
	t.e[z] = entry{key: root, meta: min(d, distSat) << metaDistShift}
	t.count++
	return z
}

// b2u8 is 1 for true.
func b2u8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
