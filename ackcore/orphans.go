package ackcore

// Orphans give way (rule 10 of docs/semantics.md). An orphan is an entry
// made by an ACK, FAIL or RESET for a root with no entry: one whose INIT
// is still on its way (a reordering between rings), or one whose root
// already finished (a late ACK of a failed or timed-out tree). The second
// kind can only expire, and while it waits it holds room a live root may
// need. So orphans are the first to go, and of them the oldest orphan of
// the owner (owners.go) holding the most, the lowest such owner on a tie:
// one sender's flood for unknown roots evicts its own orphans, never
// another's while it holds more (with one owner: the oldest orphan):
//
//   - an INIT that finds the table at its bound evicts orphans so chosen
//     until it has room, when there are orphans enough to make it (the
//     count of entries with INIT never reaches the bound while orphans
//     could give way);
//   - an ACK or RESET for a root with no entry that finds the bound
//     reached takes the place of an orphan so chosen; with no orphan to
//     replace it is refused (Refused{full});
//   - an evicted orphan's FAIL goes to the overflow filter (failfilter.go)
//     while the filter is within its budget; an evicted orphan whose INIT
//     arrives later simply times out: a replay, never a loss.
//
// Stats.OrphansEvicted counts evictions. The orphan to evict is found
// through a FIFO of the roots of entries made without INIT, in the order
// they were made (evictOrphan walks it for the first of the chosen
// owner's). An entry that stops being an orphan (its INIT came, it
// expired, it was evicted) leaves its root in the FIFO: stale, skipped,
// and dropped when it reaches the front. So that a stale root whose root id becomes
// an orphan again is not taken for the new one, each queued root carries
// a tag, its place in the FIFO's order mod 2^18, which the orphan's entry
// keeps in the task bits it has no use for (table.go): a queued root is
// live while its entry has no INIT and the same tag. The shard keeps the
// exact count of orphans, and when the FIFO is full it drops its stale
// roots if at least half are stale (or it is at its largest, where at
// most half can be live), else doubles. So it holds at most twice the
// orphans plus its initial size, and each root put in costs O(1)
// amortised and one lookup when it leaves. The ring holds 8 bytes a root
// and at most twice as many roots as the table holds entries (MaxPending
// plus the FAIL reserve): 16 bytes per entry of the bound at worst
// (Config.Bytes counts it), 8 per orphan in the common case; it is
// allocated on the first orphan, and freed when it empties unless it is
// still at its initial size.
//
// Two queued roots of one root id 2^b places apart would share a tag (b =
// 18 - bits.Len(Owners-1): 18 with one owner, 11 with 128, 6 at
// MaxOwners); the
// older, if still queued, then looks live and evicts the newer orphan
// early: a replay at worst, never a loss.

// orphanInitial is the FIFO's first size (8 KiB).
const orphanInitial = 1024

// Orphan tags and owners: bits 19..2 of an orphan's task word (bit 0 is
// flagFailed, bit 1 flagTomb) hold the owner, the producer whose message
// made the orphan (owners.go), in the top ownerBits = bits.Len(Owners-1)
// of them, and the tag in the rest: 18 bits with one owner, 6 at the
// most owners (MaxOwners).
const (
	tagShift = 2
	tagBits  = 18 // tag and owner together
)

// orphanFIFO is a ring of roots, oldest at head.
type orphanFIFO struct {
	q    []uint64
	head int    // index of the oldest root
	n    int    // roots held, live or stale
	seq  uint64 // the place in order of the root at head (roots ever popped)
	mask uint32 // the tag's bits in the word (18 - ownerBits of them, from bit 2)
	// evictOwner's orphans are at places evictSeq and after (evictOrphan);
	// evictSeq 0 when unknown.
	evictOwner int
	evictSeq   uint64
}

// tagOf is the tag of place seq.
func (f *orphanFIFO) tagOf(seq uint64) uint32 { return uint32(seq<<tagShift) & f.mask }

// push appends root and returns its tag; the ring has room (queueOrphan sees
// to it).
func (f *orphanFIFO) push(root uint64) uint32 {
	i := f.head + f.n
	if i >= len(f.q) {
		i -= len(f.q)
	}
	f.q[i] = root
	f.n++
	return f.tagOf(f.seq + uint64(f.n-1))
}

// pop removes the oldest root and returns it and its tag; ok is false
// when the ring is empty.
func (f *orphanFIFO) pop() (root uint64, tag uint32, ok bool) {
	if f.n == 0 {
		return 0, 0, false
	}
	root, tag = f.q[f.head], f.tagOf(f.seq)
	if f.head++; f.head == len(f.q) {
		f.head = 0
	}
	f.seq++
	if f.n--; f.n == 0 {
		f.empty()
	}
	return root, tag, true
}

// empty forgets every root, keeping a ring of the initial size.
func (f *orphanFIFO) empty() {
	f.head, f.n, f.evictSeq = 0, 0, 0
	if len(f.q) > orphanInitial {
		f.q = nil
	}
}

// grow moves the roots, in order, into a ring of size c >= f.n.
func (f *orphanFIFO) grow(c int) {
	q := make([]uint64, c)
	k := copy(q, f.q[f.head:min(f.head+f.n, len(f.q))])
	copy(q[k:], f.q[:f.n-k])
	f.q, f.head = q, 0
}

// keep drops, in place, the roots for which live(root, tag, newTag) is
// false, keeping the order of the others; live moves a kept root's tag to
// newTag, its tag in its new place.
func (f *orphanFIFO) keep(live func(root uint64, tag, newTag uint32) bool) {
	w := 0
	for i := range f.n {
		j := f.head + i
		if j >= len(f.q) {
			j -= len(f.q)
		}
		if r := f.q[j]; live(r, f.tagOf(f.seq+uint64(i)), f.tagOf(f.seq+uint64(w))) {
			k := f.head + w
			if k >= len(f.q) {
				k -= len(f.q)
			}
			f.q[k] = r
			w++
		}
	}
	if f.n, f.evictSeq = w, 0; w == 0 { // places moved: the eviction cursor with them
		f.empty()
	}
}

// at returns the root i places after the head and its tag (i < f.n).
func (f *orphanFIFO) at(i uint64) (root uint64, tag uint32) {
	j := f.head + int(i)
	if j >= len(f.q) {
		j -= len(f.q)
	}
	return f.q[j], f.tagOf(f.seq + i)
}

func (f *orphanFIFO) bytes() int { return 8 * len(f.q) }

// orphanSlot returns the slot of root's orphan entry tagged tag; ok is
// false when the queued root is stale.
func (s *Shard) orphanSlot(root uint64, tag uint32) (slot int, ok bool) {
	slot, found := s.t.find(root)
	if !found {
		return slot, false
	}
	w := s.t.e[slot].word()
	return slot, !w.inited() && w.orphanBits()&s.orphanQ.mask == tag
}

// retag is orphanFIFO.keep's test: root's orphan entry tagged tag, if it
// is live, takes newTag.
func (s *Shard) retag(root uint64, tag, newTag uint32) bool {
	slot, ok := s.orphanSlot(root, tag)
	if ok {
		e := &s.t.e[slot]
		e.meta = e.meta&^(uint64(s.orphanQ.mask)<<32) | uint64(newTag)<<32
	}
	return ok
}

// queueOrphan queues root, whose entry without INIT is being made (and
// already counted in s.orphans), and returns the tag the entry keeps.
func (s *Shard) queueOrphan(root uint64) uint32 {
	f := &s.orphanQ
	if f.n == len(f.q) {
		most := 2 * (s.maxPending + s.failReserve)
		switch {
		case len(f.q) == 0:
			f.grow(min(orphanInitial, most))
		case f.n >= 2*(s.orphans-1) || len(f.q) >= most: // root itself is counted, not queued
			f.keep(s.retag) // at least half stale, or at the largest
		default:
			f.grow(min(2*len(f.q), most))
		}
		if len(f.q) == 0 {
			f.grow(min(orphanInitial, most))
		} else if f.n == len(f.q) {
			// Still full: only with tags shared 2^b places apart. The
			// oldest root leaves the FIFO; its orphan, if live, can no
			// longer be evicted and expires in its time.
			f.pop()
		}
	}
	return f.push(root)
}

// evictOrphan removes the oldest orphan of the owner with the most
// orphans (rule 10: the sender most over its share gives way, oldest
// first; among owners with as many, the lowest), sending its FAIL, if it
// holds one, to the overflow filter. It reports false when there is none.
//
// The FIFO is walked from the head for the victim owner's first live
// root; the evicted root's place goes stale where it is (popped when it
// reaches the head), and other owners' orphans keep theirs, so each
// owner's orphans stay in the order they were made. The place after the
// last one evicted is remembered with its owner (f.evictOwner, evictSeq):
// no later place before it can hold that owner's orphan (new ones are
// pushed behind), so a flood evicting its own orphans one by one walks
// past the others' orphans once, not once per eviction.
func (s *Shard) evictOrphan() bool {
	f := &s.orphanQ
	for f.n > 0 { // stale roots at the head go first
		if _, live := s.orphanSlot(f.q[f.head], f.tagOf(f.seq)); live {
			break
		}
		f.pop()
	}
	if s.orphans == 0 || f.n == 0 {
		return false // f.n == 0 only after a root left the FIFO early (queueOrphan)
	}
	victim := s.victimOwner()
	i := uint64(0)
	if victim == f.evictOwner && f.evictSeq > f.seq {
		i = f.evictSeq - f.seq
	}
	for ; i < uint64(f.n); i++ {
		root, tag := f.at(i)
		slot, live := s.orphanSlot(root, tag)
		if !live {
			continue
		}
		if w := s.t.e[slot].word(); s.ownerOf(w) == victim {
			f.evictOwner, f.evictSeq = victim, f.seq+i+1
			s.evict(root, slot, w)
			return true
		}
	}
	// The victim's orphans have left the FIFO early (queueOrphan, with
	// tags shared): the oldest orphan of any owner goes.
	root, tag := f.at(0)
	slot, _ := s.orphanSlot(root, tag)
	s.evict(root, slot, s.t.e[slot].word())
	f.pop()
	return true
}

// evict removes root's orphan entry, in slot with word w, at the bound.
func (s *Shard) evict(root uint64, slot int, w metaWord) {
	if w.failedEarly() {
		s.holdFail(root)
	}
	s.dropEntry(slot)
	s.orphans--
	s.ownerOrphans[s.ownerOf(w)]--
	s.stats.OrphansEvicted++
}

// victimOwner is the owner with the most orphans, the lowest of those
// with as many: O(Config.Owners), once per eviction at the bound (about
// a microsecond at MaxOwners).
func (s *Shard) victimOwner() int {
	n, v := s.ownerOrphans, 0
	for o := 1; o < len(n); o++ {
		if n[o] > n[v] {
			v = o
		}
	}
	return v
}

// orphanGone is called for every orphan entry that leaves the table other
// than by eviction (expiry, StopAll, its INIT) or becomes live (its INIT),
// with the entry's word (which names its owner).
func (s *Shard) orphanGone(w metaWord) {
	s.ownerOrphans[s.ownerOf(w)]--
	if s.orphans--; s.orphans == 0 && s.orphanQ.n > 0 {
		s.orphanQ.empty() // every root left is stale
	}
}

// makeRoom evicts the oldest orphans for c's new entry (an INIT's, or an
// ACK's or RESET's taking an orphan's place), which found the table at its
// bound, when there are enough of them to bring it under, and re-probes c
// (an eviction shifts entries). It reports whether c now has room.
func (s *Shard) makeRoom(c *cur) bool {
	if s.t.count-s.orphans >= s.maxPending {
		return false // entries with INIT fill the bound (and the reserve holds the rest)
	}
	for s.t.count >= s.maxPending && s.evictOrphan() {
	}
	c.slot, _ = s.t.find(c.root)
	return s.create(c, s.maxPending)
}
