package baseline

// Orphans give way at the bound, as in the shard (docs/semantics.md, rule
// 10): GoMap keeps the roots of its entries made without INIT in a FIFO,
// in the order they were made, each tagged with its place in that order
// (mod 2^20, kept in the orphan entry's unused task bits) so that a stale
// root is never taken for a later orphan of the same id. An INIT, ACK or
// RESET that needs a new entry at the bound evicts the oldest live
// orphans until there is room, when there are enough; an evicted orphan's
// FAIL is dropped (GoMap has no FAIL filter: Stats.FailsDropped). A drain
// (rule 3: what a failed tree still owes) is queued as the newest orphan
// when its FAIL makes it, under a new tag, and gives way like any other.
// The FIFO
// drops its stale roots when they are at least half of it, so it holds at
// most about twice the orphans.

// orphanFIFO is GoMap's FIFO of orphan roots: q[head:] in order, the root
// at q[head] having place seq.
type orphanFIFO struct {
	q    []uint64
	head int
	seq  uint64
}

func orphanTag(seq uint64) uint32 { return uint32(seq) & taskMask }

// addOrphan queues root, whose entry without INIT is being made, and
// returns the tag its entry keeps.
func (g *GoMap) addOrphan(root uint64) uint32 {
	g.orphans++
	f := &g.oq
	if n := len(f.q) - f.head; n >= 1024 && n >= 2*g.orphans {
		// At least half stale: keep the live roots, in order, retagged.
		w := 0
		for i, r := range f.q[f.head:] {
			if e, ok := g.m[r]; ok && e.word&flagInit == 0 && e.word&taskMask == orphanTag(f.seq+uint64(i)) {
				e.word = e.word&^taskMask | orphanTag(f.seq+uint64(w))
				g.m[r] = e
				f.q[w] = r
				w++
			}
		}
		f.q, f.head = f.q[:w], 0
	} else if f.head > len(f.q)/2 && f.head >= 1024 {
		f.q, f.head = append(f.q[:0], f.q[f.head:]...), 0
	}
	f.q = append(f.q, root)
	return orphanTag(f.seq + uint64(len(f.q)-f.head-1))
}

// makeRoom evicts the oldest orphans until the map is under its bound,
// when there are enough of them; it reports whether there is room.
func (g *GoMap) makeRoom() bool {
	if len(g.m)-g.orphans >= g.maxPending {
		return false
	}
	f := &g.oq
	for len(g.m) >= g.maxPending && f.head < len(f.q) {
		r, tag := f.q[f.head], orphanTag(f.seq)
		f.head++
		f.seq++
		e, ok := g.m[r]
		if !ok || e.word&flagInit != 0 || e.word&taskMask != tag {
			continue // stale
		}
		if e.word&flagFailed != 0 {
			g.stats.FailsDropped++
		}
		g.remove(r, e)
		g.orphans--
		g.stats.OrphansEvicted++
	}
	return len(g.m) < g.maxPending
}

// makeDrain turns root's entry e, whose INIT was seen and which a FAIL
// carrying a val has just failed with val still owed, into a drain (rule
// 3): a new entry without INIT or task, made now with the default timeout,
// queued as the newest orphan under a new tag, so that the FIFO's older
// places for root (an early ACK made the entry before its INIT) are stale
// and cannot evict it.
func (g *GoMap) makeDrain(root uint64, e entry) {
	if e.word&flagCustom != 0 {
		delete(g.custom, root)
	}
	e.word = flagDrain | g.addOrphan(root)
	g.m[root] = e
	g.arm(e.h, g.deadlineAfter(g.nowNs, g.defNs), true)
}

// endDrain removes root's drain e, whose val the last ACK or FAIL of its
// tree brought to 0: silently, counted in Stats.OrphansDrained.
func (g *GoMap) endDrain(root uint64, e entry) {
	g.remove(root, e)
	g.orphans--
	g.stats.OrphansDrained++
}

// insertOrphan adds root's entry e, made without INIT, queued as an orphan.
func (g *GoMap) insertOrphan(root uint64, e entry, timeoutNs int64) {
	e.word |= g.addOrphan(root)
	g.insert(root, e, timeoutNs)
}

// FailBudget is 0: GoMap holds no FAIL over its bound (a FAIL that needs
// an entry there is refused, and an evicted orphan's FAIL is dropped). It
// tells the conformance kit that GoMap's orphans give way
// (acktest.Evicter).
func (g *GoMap) FailBudget() int { return 0 }
