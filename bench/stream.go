package bench

import (
	"math/bits"
	"slices"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/acktest/workload"
	"github.com/xorack/xorack/internal/splitmix"
)

// meta describes one position of a stream, 8 bytes:
//
//	+--------+------+------+-----+
//	| slot   | j    | head | pad |
//	| 0..3   | 4..5 | 6    | 7   |
//	+--------+------+------+-----+
//
// slot is the tree slot (workload.Stream slot index), j the message's
// index in its tree in causal order (0 is the INIT, k-1 the last ACK), and
// head says whether a cycle position belongs to the tree that starts in
// this cycle (its round is at or past the slot's phase) rather than to the
// one that the previous cycle started. Prefix positions are all heads.
type meta struct {
	slot int32
	j    uint16
	head bool
}

// stream is a workload.Stream with the per-position facts the harness
// needs (meta) computed once, shared read-only by every impl at every
// level.
type stream struct {
	*workload.Stream
	pmeta, cmeta []meta // for Prefix and Cycle
}

// newStream computes st's meta. Slot per message comes from a flat table
// keyed by root (roots are random, so their top bits index it directly):
// one pass, no Go map, since a million-root window has 17 M positions.
func newStream(st *workload.Stream) *stream {
	s := &stream{Stream: st, pmeta: make([]meta, len(st.Prefix)), cmeta: make([]meta, len(st.Cycle))}
	lg := bits.Len(uint(2*st.Slots - 1))
	if lg < 1 {
		lg = 1
	}
	mask := uint64(1)<<lg - 1
	keys := make([]uint64, 1<<lg)
	vals := make([]int32, 1<<lg)
	for i, r := range st.Roots {
		h := r >> (64 - lg)
		for keys[h] != 0 {
			h = (h + 1) & mask
		}
		keys[h], vals[h] = r, int32(i)
	}
	slotOf := func(r uint64) int32 {
		h := r >> (64 - lg)
		for keys[h] != r {
			h = (h + 1) & mask
		}
		return vals[h]
	}
	k := st.K
	next := make([]uint16, st.Slots) // prefix: next j per slot
	for i, m := range st.Prefix {
		sl := slotOf(m.Root)
		s.pmeta[i] = meta{slot: sl, j: next[sl], head: true}
		next[sl]++
	}
	for i, m := range st.Cycle {
		sl := slotOf(m.Root)
		r := i / st.Slots // every round holds every slot once
		phase := int(sl) % k
		s.cmeta[i] = meta{slot: sl, j: uint16((r - phase + k) % k), head: r >= phase}
	}
	return s
}

// cycleMsgs is the length of the whole stream's cycle.
func (s *stream) cycleMsgs() int { return len(s.Cycle) }

// share is one producer's part of a stream: the positions of the slots it
// owns (slot mod n == p), in stream order. Each share is itself a steady
// stream: a slot's messages stay together, in causal order, in one share.
// At core level there is one share, the whole stream, with no copy.
type share struct {
	k            int
	prefix       []ackcore.Msg
	pmeta        []meta
	cycle        []ackcore.Msg
	cmeta        []meta
	roundAt      []int    // roundAt[r]: first cycle index of round r; roundAt[k] = len(cycle)
	initsBefore  []uint64 // initsBefore[r]: INITs in rounds < r; initsBefore[k] per cycle
	prefixInits  uint64
	cycleOfWhole int // messages in the whole stream's cycle, for timeouts

	// For fault mode: the share is producer p of n (it owns the slots
	// with slot mod n == p, local index slot/n), roots the whole stream's
	// roots by slot.
	p, n  int
	roots []uint64
}

// shares splits s among n producers.
func (s *stream) shares(n int) []*share {
	k := s.K
	out := make([]*share, n)
	for p := range out {
		sh := &share{k: k, cycleOfWhole: len(s.Cycle), p: p, n: n, roots: s.Roots}
		if n == 1 {
			sh.prefix, sh.pmeta, sh.cycle, sh.cmeta = s.Prefix, s.pmeta, s.Cycle, s.cmeta
		} else {
			for i, md := range s.pmeta {
				if int(md.slot)%n == p {
					sh.prefix = append(sh.prefix, s.Prefix[i])
					sh.pmeta = append(sh.pmeta, md)
				}
			}
			for i, md := range s.cmeta {
				if int(md.slot)%n == p {
					sh.cycle = append(sh.cycle, s.Cycle[i])
					sh.cmeta = append(sh.cmeta, md)
				}
			}
		}
		for _, md := range sh.pmeta {
			if md.j == 0 {
				sh.prefixInits++
			}
		}
		// Rounds: the whole stream's round r is positions [r*Slots,
		// (r+1)*Slots); a share keeps their order, so its rounds are
		// contiguous too. A round boundary is where j's phase changes,
		// found by counting each round's messages.
		sh.roundAt = make([]int, k+1)
		sh.initsBefore = make([]uint64, k+1)
		pos := 0
		for r := 0; r < k; r++ {
			sh.roundAt[r] = pos
			sh.initsBefore[r+1] = sh.initsBefore[r]
			for pos < len(sh.cycle) && sh.roundOf(pos) == r {
				if sh.cmeta[pos].j == 0 {
					sh.initsBefore[r+1]++
				}
				pos++
			}
		}
		sh.roundAt[k] = len(sh.cycle)
		out[p] = sh
	}
	return out
}

// roundOf recovers the round of a share's cycle position from its meta:
// j = (r - phase) mod k with phase = slot mod k.
func (sh *share) roundOf(pos int) int {
	md := sh.cmeta[pos]
	return (int(md.j) + int(md.slot)%sh.k) % sh.k
}

// Fault injection. A root with fails or drops leaves entries behind (the
// drain or orphans of the acks after a FAIL; a dropped root's entry until
// it times out), so a faulted tree cannot keep its slot's root id: a later
// generation of the tree would meet them. Generation g of slot i is the
// tree whose INIT is in cycle g-1's head part (the prefix is cycle -1);
// its key is root_i ^ salt(g). Which slots are faulted, whether each fails
// or drops, and which of its messages (never the INIT), follows from a
// hash of the slot, drawn once: the same trees of the stream fail in
// every generation, each under its generation's new root id, so that the
// acker meets roots it has never seen, as it would in a stream that
// drew them afresh. A faulted tree's messages carry the key as their root
// id; a tree left alone keeps root_i, which its slot's earlier
// generations (all complete before its INIT, in causal order in one
// share) no longer hold. The edge values do not change (the XOR of a
// tree's messages does not depend on its root id). So a cycle is replayed
// from the share's memory with only the faulted trees' messages
// rewritten, each as its act (a byte per cycle position, computed once)
// says, under the salts of the cycle's two generations.

// faultGen holds a run's fault parameters.
type faultGen struct {
	k     uint64
	failT uint64 // u < failT: the slot's trees fail (u: 53-bit hash)
	injT  uint64 // failT <= u < injT: they drop one ACK
	seed  uint64
	bare  bool // FAILs carry no val (Config.FailBare)
}

const unit53 = 1 << 53

func newFaultGen(k int, fail, drop float64, seed uint64) *faultGen {
	g := &faultGen{k: uint64(k), seed: splitmix.Mix64(seed ^ 0x6a09e667f3bcc909)}
	g.failT = uint64(fail * unit53)
	g.injT = uint64((fail + drop) * unit53)
	return g
}

// fateOf is the fate of the trees of slot (the whole stream's slot index).
func (g *faultGen) fateOf(slot int) tfate {
	h := splitmix.Mix64(g.seed ^ uint64(slot)*splitmix.Golden)
	u := h >> 11
	if u >= g.injT {
		return 0
	}
	f := tfate(1 + splitmix.Mix64(h)%(g.k-1))
	if u >= g.failT {
		f |= dropBit
	}
	return f
}

// faultGen is the run's fault generator for trees of k messages, nil
// without fails or drops.
func (c *resolved) faultGen(k int) *faultGen {
	if !c.faults() {
		return nil
	}
	g := newFaultGen(k, c.FailRate, c.DropRate, c.Seed)
	g.bare = c.FailBare
	return g
}

// salt is generation g's root salt. Even, so that the stream's odd roots
// stay odd and never become 0.
func (g *faultGen) salt(gen int64) uint64 {
	return splitmix.Mix64(g.seed^uint64(gen)*splitmix.Golden) &^ 1
}

// tfate packs a tree's fate: 0 none, else victim | dropBit for a drop.
type tfate uint16

const dropBit tfate = 1 << 15

// act is what fault mode does to one cycle position's message, 0 for a
// message left alone (newFaultState computes them), so that sending a
// span costs one byte's test per message and a few instructions per
// faulted one.
type act uint8

const (
	actSalt1   act = 1 << iota // the salt of generation cyc+1 (head), not cyc's
	actRoot                    // the root takes its generation's salt (every act but a drop)
	actFail                    // the message becomes the tree's FAIL
	actDrop                    // the message is dropped
	actInjFail                 // the INIT of a tree injected with a fail (counted)
	actInjDrop                 // the INIT of a tree injected with a drop
)

// actOf is the act for message j of a tree of fate f, of generation cyc
// (h 0) or cyc+1 (h 1).
func actOf(f tfate, h, j int) act {
	if f == 0 {
		return 0
	}
	a := actRoot | act(h)*actSalt1
	switch victim := int(f &^ dropBit); {
	case j == 0 && f&dropBit != 0:
		a |= actInjDrop
	case j == 0:
		a |= actInjFail
	case j == victim && f&dropBit != 0:
		return actDrop
	case j == victim:
		a |= actFail
	}
	return a
}

// faultState is a cursor's fault bookkeeping: the slots' fates and the
// positions' acts, fixed, and the salts of the cycle being replayed.
type faultState struct {
	g     *faultGen
	tab   []tfate   // by local slot: its trees' fate
	acts  []act     // by cycle position: its act
	cyc   int64     // the cycle the salts are for (-1: the prefix; -2: none yet)
	salts [2]uint64 // salt of generation cyc (non-head) and cyc+1 (head)
}

func newFaultState(sh *share, g *faultGen) *faultState {
	ns := (len(sh.roots) - sh.p + sh.n - 1) / sh.n
	fs := &faultState{g: g, tab: make([]tfate, ns), acts: make([]act, len(sh.cycle)), cyc: -2}
	for ls := range fs.tab {
		fs.tab[ls] = g.fateOf(sh.p + ls*sh.n)
	}
	for pos, md := range sh.cmeta {
		fs.acts[pos] = fs.actAt(md, sh.n)
	}
	return fs
}

// actAt is the act of a position of meta d in a share of n.
func (fs *faultState) actAt(d meta, n int) act {
	h := 0
	if d.head {
		h = 1
	}
	return actOf(fs.tab[int(d.slot)/n], h, int(d.j))
}

// enter readies the salts of cycle cyc (generations cyc, cyc+1).
func (fs *faultState) enter(cyc int64) {
	if fs.cyc == cyc {
		return
	}
	fs.cyc = cyc
	fs.salts = [2]uint64{fs.g.salt(cyc), fs.g.salt(cyc + 1)}
}

// cursor walks a share: the prefix once, then the cycle forever. It owns
// the position, the fault state and the counts of what it emitted.
// One goroutine at a time.
type cursor struct {
	sh  *share
	cyc int64 // cycles completed since the prefix
	pos int   // next cycle position
	fs  *faultState

	buf  []ackcore.Msg // fault mode: rewritten messages
	mbuf []meta
	drop []int // fault mode: buf indices dropped in the current block

	// Trees injected with a fail or a drop, counted at their INIT.
	injFail, injDrop uint64
}

func newCursor(sh *share, fg *faultGen, batch int) *cursor {
	c := &cursor{sh: sh}
	if fg != nil {
		c.fs = newFaultState(sh, fg)
		c.buf = make([]ackcore.Msg, 0, batch)
		c.mbuf = make([]meta, 0, batch)
	}
	return c
}

// prefix calls fn with the prefix in batches.
func (c *cursor) prefix(batch int, fn func([]ackcore.Msg, []meta)) {
	p, pm := c.sh.prefix, c.sh.pmeta
	for i := 0; i < len(p); i += batch {
		end := min(i+batch, len(p))
		if c.fs == nil {
			fn(p[i:end], pm[i:end])
			continue
		}
		fn(c.rewrite(p[i:end], pm[i:end], -1, -1))
	}
}

// next returns the next up to n messages of the cycle and their meta, not
// crossing the cycle's end (nor, with toRound, the next round boundary).
// Without faults it returns the share's own memory: read-only.
func (c *cursor) next(n int, toRound bool) ([]ackcore.Msg, []meta) {
	msgs, from, _ := c.span(n, toRound)
	end := from + len(msgs)
	if c.fs == nil {
		return msgs, c.sh.cmeta[from:end]
	}
	return c.block(from, end)
}

// span is next without the copy: the share's own memory (read-only) for
// the next up to n positions, from (the first one's cycle position) and
// cyc (their cycle). In fault mode it readies the fault state for cyc,
// and the caller passes each message whose act (fs.acts[from+i]) is set
// through hit before it asks for the next span: a producer sends a span's
// messages straight from the share, and only the faulted trees'
// messages, about one in twenty at a 5% fail rate, are rewritten on
// their way.
func (c *cursor) span(n int, toRound bool) (msgs []ackcore.Msg, from int, cyc int64) {
	sh := c.sh
	end := min(c.pos+n, len(sh.cycle))
	if toRound {
		end = min(end, sh.roundAt[c.round()+1])
	}
	from, cyc = c.pos, c.cyc
	c.pos = end
	if c.pos == len(sh.cycle) {
		c.pos = 0
		c.cyc++
	}
	if c.fs != nil {
		c.fs.enter(cyc)
	}
	return sh.cycle[from:end], from, cyc
}

// hit applies a, the act of a message of the last span's cycle, to *m
// and reports whether m is sent (false: the ACK a dropped tree loses).
func (c *cursor) hit(m *ackcore.Msg, a act) bool {
	if a&actRoot != 0 {
		m.Root ^= c.fs.salts[a&actSalt1]
	}
	switch {
	case a&actDrop != 0:
		return false
	case a&actFail != 0:
		val := m.Val // the failed tuple's ack val: the tree's later ACKs empty the drain it leaves
		if c.fs.g.bare {
			val = 0
		}
		*m = ackcore.Msg{Root: m.Root, Kind: ackcore.Fail, Val: val}
	case a&actInjFail != 0:
		c.injFail++
	case a&actInjDrop != 0:
		c.injDrop++
	}
	return true
}

// block is cycle cyc's positions [from, end) in fault mode, just taken by
// span: a copy of the share's messages with the faulted positions
// rewritten.
func (c *cursor) block(from, end int) ([]ackcore.Msg, []meta) {
	c.buf = append(c.buf[:0], c.sh.cycle[from:end]...)
	c.drop = c.drop[:0]
	for i, a := range c.fs.acts[from:end] {
		if a != 0 && !c.hit(&c.buf[i], a) {
			c.drop = append(c.drop, i)
		}
	}
	md := c.sh.cmeta[from:end]
	if len(c.drop) == 0 {
		return c.buf, md
	}
	c.mbuf = c.mbuf[:0]
	out, di := 0, 0
	for i := range c.buf {
		if di < len(c.drop) && c.drop[di] == i {
			di++
			continue
		}
		c.buf[out] = c.buf[i]
		c.mbuf = append(c.mbuf, md[i])
		out++
	}
	return c.buf[:out], c.mbuf
}

// fault rewrites *m, a message of a tree whose fate may be set, and
// reports whether it is dropped, by the act its meta gives (rewrite: the
// prefix's positions have none in acts). The salts must be for m's cycle
// (enter).
func (c *cursor) fault(m *ackcore.Msg, d meta) bool {
	return !c.hit(m, c.fs.actAt(d, c.sh.n))
}

// round is the round the cursor's next position belongs to: the last r
// below k with roundAt[r] <= pos.
func (c *cursor) round() int {
	at := c.sh.roundAt[:c.sh.k]
	r, _ := slices.BinarySearch(at, c.pos+1)
	return r - 1
}

// atRound reports whether the cursor stands at a round boundary.
func (c *cursor) atRound() bool {
	for _, b := range c.sh.roundAt {
		if b == c.pos {
			return true
		}
	}
	return false
}

// rewrite applies the fault state to msgs of cycle cyc (-1: the prefix)
// message by message, for the prefix and the drain. With minJ >= 0 it
// also keeps only messages whose j exceeds minJ (the drain).
func (c *cursor) rewrite(msgs []ackcore.Msg, md []meta, cyc int64, minJ int) ([]ackcore.Msg, []meta) {
	c.buf, c.mbuf = c.buf[:0], c.mbuf[:0]
	if c.fs != nil {
		c.fs.enter(cyc)
	}
	for i, m := range msgs {
		d := md[i]
		if int(d.j) <= minJ {
			continue
		}
		if c.fs != nil && c.fault(&m, d) {
			continue
		}
		c.buf = append(c.buf, m)
		c.mbuf = append(c.mbuf, d)
	}
	return c.buf, c.mbuf
}

// drain finishes every tree started so far and starts none: from a round
// boundary it replays the next k rounds, keeping in round d of them only
// the messages with j > d (their trees started before the boundary). It
// calls fn with batches of at most batch messages. Read roots before: the
// cursor ends k rounds further on, past INITs it never emitted.
func (c *cursor) drain(batch int, fn func([]ackcore.Msg, []meta)) {
	if !c.atRound() {
		panic("bench: drain off a round boundary")
	}
	sh := c.sh
	for d := 0; d < sh.k; d++ {
		r := c.round()
		end := sh.roundAt[r+1]
		for i := c.pos; i < end; i += batch {
			e := min(i+batch, end)
			msgs, md := c.rewrite(sh.cycle[i:e], sh.cmeta[i:e], c.cyc, d)
			if len(msgs) > 0 {
				fn(msgs, md)
			}
		}
		c.pos = end
		if c.pos == len(sh.cycle) {
			c.pos = 0
			c.cyc++
		}
	}
}

// roots is the number of roots emitted (INITs produced) so far; the
// cursor must stand at a round boundary.
func (c *cursor) roots() uint64 {
	sh := c.sh
	n := sh.prefixInits + uint64(c.cyc)*sh.initsBefore[sh.k]
	for r := 0; r <= sh.k; r++ {
		if sh.roundAt[r] == c.pos {
			return n + sh.initsBefore[r]
		}
	}
	panic("bench: roots off a round boundary")
}
