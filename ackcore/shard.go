package ackcore

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/xorack/xorack/internal/invariants"
	"github.com/xorack/xorack/timerwheel"
)

// Defaults, as in Apache Storm (TOPOLOGY_MESSAGE_TIMEOUT_SECS = 30) and the
// wheel's design tick.
const (
	DefaultTimeout = 30 * time.Second
	DefaultTick    = time.Millisecond
)

// FoldMode says whether Apply groups a batch's messages by root first.
type FoldMode uint8

const (
	// FoldOff applies messages one by one, one table probe each.
	FoldOff FoldMode = iota
	// FoldOn groups each chunk of up to foldChunk messages by root and
	// probes the table once per root. It pays when batches repeat roots
	// (fan-out acks arriving together) and the table is larger than cache.
	FoldOn
)

// prefetchAbove is the table size past which Apply prefetches a chunk's
// lines ahead: below it the table lives in L2 and the prefetch pass only
// adds instructions (MEASURING.md: 1 MiB random loads take 9.5 ns, 16 MiB
// 145 ns).
const prefetchAbove = 1 << 20

// Config configures a Shard.
type Config struct {
	// MaxPending bounds the entries pending at once, with or without INIT
	// (SEMANTICS rule 10). Required. The table is allocated for it up front.
	MaxPending int
	// Timeout is the default per-root timeout; 0 means DefaultTimeout.
	Timeout time.Duration
	// Tick is the timer resolution; 0 means DefaultTick.
	Tick time.Duration
	// Clock is the time source; nil means a new MonotonicClock.
	Clock Clock
	// Fold selects batch folding.
	Fold FoldMode
	// Seed fixes the table's hash keys, for reproducible tests and
	// benchmarks. 0, the default, draws secret keys from crypto/rand: keep
	// it so wherever root ids may come from outside, since roots chosen
	// with the keys known can all share one home slot (see hash.go).
	Seed uint64
}

// MaxPendingLimit is the largest MaxPending a shard accepts: near-wheel
// timer handles (at most one per entry) are 32-bit.
const MaxPendingLimit = timerwheel.MaxCapacity / maxLoadDen * maxLoadNum

// MinTick is the finest Tick a shard accepts: the longest timeout,
// MaxTimeout, must stay within the timer wheel's reach (MaxDelay ticks),
// and a deadline stored as a 32-bit tick must be recovered exactly.
const MinTick = 100 * time.Microsecond

// Validate checks c, with an error naming the bad value. NewShard calls it;
// an embedder that builds shards later (the sharded acker) calls it first.
func (c *Config) Validate() error {
	if c.MaxPending <= 0 || c.MaxPending > MaxPendingLimit {
		return fmt.Errorf("ackcore: MaxPending %d out of range [1, %d]", c.MaxPending, MaxPendingLimit)
	}
	if c.Timeout < 0 || c.Timeout > MaxTimeout {
		return fmt.Errorf("ackcore: Timeout %v out of range [0, %v]", c.Timeout, MaxTimeout)
	}
	if c.Tick < 0 || c.Tick > time.Second {
		return fmt.Errorf("ackcore: Tick %v out of range [0, 1s]", c.Tick)
	}
	if c.Tick > 0 && c.Tick < MinTick {
		return fmt.Errorf("ackcore: Tick %v below %v", c.Tick, MinTick)
	}
	if tick, to := c.Tick, c.Timeout; tick > 0 && to > 0 && to%tick != 0 || tick == 0 && to%DefaultTick != 0 {
		return fmt.Errorf("ackcore: Timeout %v is not a whole number of ticks (Tick %v)", c.Timeout, c.Tick)
	}
	if c.Fold > FoldOn {
		return fmt.Errorf("ackcore: unknown Fold mode %d", c.Fold)
	}
	return nil
}

// custom holds what an entry cannot derive from its deadline: a start time
// moved away from deadline-timeout by RESET, or a per-root timeout.
type custom struct {
	start   uint64 // the INIT's start tick (see nowStart)
	timeout int64  // the root's timeout in ns
}

// Shard is a single-writer acker: one goroutine owns it and calls Apply and
// Expire; nothing in it is safe for concurrent use. See doc.go.
type Shard struct {
	t          table
	clock      Clock
	custom     map[uint64]custom // roots with flagCustom; rare (RESET, per-root timeouts)
	nearTimers                   // deadlines due soon (near.go)

	tickNs     int64
	defNs      int64  // default timeout, ns
	defTicks   uint64 // default timeout in whole ticks, rounded up
	maxPending int
	fold       FoldMode

	// Per-call time, set at the top of Apply and Expire.
	nowNs       int64
	nowTick     uint64
	defDeadline uint64 // deadlineAfter(defNs) at nowNs

	stats    Stats
	fs       *foldScratch
	prefetch bool                     // prefetch table lines a chunk ahead (large tables only)
	hs       [2][prefetchChunk]uint64 // home slots of the chunk being applied and the next
}

// NewShard makes a shard, allocating its table for cfg.MaxPending entries.
func NewShard(cfg Config) (*Shard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Tick == 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.Clock == nil {
		cfg.Clock = NewMonotonicClock()
	}
	s := &Shard{
		t:          newTable(cfg.MaxPending, newKeys(cfg.Seed)),
		clock:      cfg.Clock,
		custom:     make(map[uint64]custom),
		tickNs:     int64(cfg.Tick),
		defNs:      int64(cfg.Timeout),
		maxPending: cfg.MaxPending,
		fold:       cfg.Fold,
	}
	s.defTicks = uint64((s.defNs + s.tickNs - 1) / s.tickNs)
	s.setNow()
	s.initNear()
	if cfg.Fold == FoldOn {
		s.fs = new(foldScratch)
	}
	s.prefetch = s.t.bytes() > prefetchAbove
	return s, nil
}

func (s *Shard) setNow() {
	ns := int64(s.clock.Now())
	if ns < 0 {
		ns = 0
	}
	if ns < s.nowNs {
		ns = s.nowNs // a clock that steps back: time stands still
	}
	s.nowNs = ns
	s.nowTick = uint64(ns / s.tickNs)
	s.defDeadline = uint64((ns + s.defNs + s.tickNs - 1) / s.tickNs)
}

// deadlineAfter is the tick at which a timeout of ns started now expires:
// the first tick boundary at or after now+ns, so a root never times out
// early and at most one tick late when Expire runs every tick.
func (s *Shard) deadlineAfter(ns int64) uint64 {
	if ns == s.defNs {
		return s.defDeadline // computed once per call: no division per INIT
	}
	return uint64((s.nowNs + ns + s.tickNs - 1) / s.tickNs)
}

// Stats returns the shard's counters.
func (s *Shard) Stats() Stats {
	st := s.stats
	st.Pending = s.t.count
	return st
}

// Tick is the shard's timer resolution: Expire is due once per Tick.
func (s *Shard) Tick() time.Duration { return time.Duration(s.tickNs) }

// Pending is the number of entries in the table.
func (s *Shard) Pending() int { return s.t.count }

// MaxPending is the configured bound.
func (s *Shard) MaxPending() int { return s.maxPending }

// TableBytes is the memory the shard holds for its table and timers.
func (s *Shard) TableBytes() int { return s.t.bytes() + s.nearBytes() }

// cur is one root's entry while a group of its messages is applied: loaded
// from the table once, stepped per message, stored once.
type cur struct {
	root     uint64
	slot     int  // the entry's slot when inTable, else the empty slot its probe ended at
	inTable  bool // the table held the entry when the group began
	live     bool // the entry exists now
	resched  bool // deadline must be (re)armed on store
	val      uint64
	word     uint32 // task | flags; flagNear is the table's, not cur's
	deadline uint64
}

// load begins a group: one probe for root.
func (s *Shard) load(c *cur, root uint64) {
	slot, found := s.t.find(root)
	*c = cur{root: root, slot: slot, inTable: found, live: found}
	if found {
		e := &s.t.e[slot]
		c.val, c.word = e.val, e.word()
	}
}

// store ends a group: it writes c back, removes it, or inserts it.
func (s *Shard) store(c *cur) {
	e := &s.t.e[c.slot]
	switch {
	case c.inTable && c.live:
		e.val = c.val
		keep := flagNear | distMask // the table's, not cur's
		e.meta = uint64(c.word&^keep|e.word()&keep)<<32 | e.meta&0xffffffff
		if c.resched {
			s.setDeadline(e, c.deadline)
		}
	case c.inTable:
		if e.word()&flagNear != 0 {
			s.freeNear(uint32(e.meta))
		}
		s.removeSlot(c.slot)
	case c.live:
		e = &s.t.e[s.insertSlot(c.root, uint64(c.slot))]
		e.val = c.val
		e.meta |= uint64(c.word&^(flagNear|distMask)) << 32
		s.setDeadline(e, c.deadline)
	}
	if invariants.Enabled {
		s.check()
	}
}

// removeSlot empties slot i and restores Robin Hood order: the entries
// after the hole move back one slot each, up to an empty slot or an entry
// in its home slot.
func (s *Shard) removeSlot(i int) {
	t := &s.t
	es, n := t.e, t.n
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
func shiftUp(es []entry, p, z uint64) {
	for q := z; q != p; {
		pq := q - 1
		if q == 0 {
			pq = uint64(len(es)) - 1
		}
		es[q] = es[pq]
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
	shiftUp(es, p, z)
	if p > z && s.scan > 0 {
		s.rescan(&es[0]) // moved round the end, behind a running pass
	}
	es[p] = entry{key: root, meta: min(d, distSat) << (32 + distShift)}
	t.count++
	return p
}

// currentDeadline is c's deadline as of now in the group.
func (s *Shard) currentDeadline(c *cur) uint64 {
	if c.resched || !c.inTable {
		return c.deadline
	}
	return s.deadlineOf(&s.t.e[c.slot])
}

// nowStart is the start tick recorded for an INIT now: the tick boundary at
// or after now, the same rounding deadlineAfter uses, so that a default
// entry's start is exactly its deadline minus the default timeout.
func (s *Shard) nowStart() uint64 { return uint64((s.nowNs + s.tickNs - 1) / s.tickNs) }

// start is the tick boundary at or after c's INIT.
func (s *Shard) start(c *cur) uint64 {
	if c.word&flagCustom != 0 {
		return s.custom[c.root].start
	}
	return s.currentDeadline(c) - s.defTicks
}

// timeoutNs is c's timeout.
func (s *Shard) timeoutNs(c *cur) int64 {
	if c.word&flagCustom != 0 {
		return s.custom[c.root].timeout
	}
	return s.defNs
}

// latency is the time since an INIT whose start tick is start. The INIT
// happened within the tick before start, so half a tick is added back: the
// error is at most half a tick.
func (s *Shard) latency(start uint64) time.Duration {
	d := s.nowNs - int64(start)*s.tickNs + s.tickNs/2
	if d < 0 {
		return 0
	}
	return time.Duration(d)
}

// create makes c a new entry (rule 7 when word has no flagInit), unless the
// bound is reached; store inserts it.
func (s *Shard) create(c *cur, val uint64, word uint32, timeoutNs int64) bool {
	if !c.inTable && s.t.count >= s.maxPending {
		return false
	}
	c.live, c.val, c.word = true, val, word
	c.resched, c.deadline = true, s.deadlineAfter(timeoutNs)
	return true
}

// kill removes c's entry (on store) and forgets its custom data.
func (s *Shard) kill(c *cur) {
	if c.word&flagCustom != 0 {
		delete(s.custom, c.root)
	}
	c.live = false
	c.resched = false
}

// setCustom records c's start tick and timeout in the side map.
func (s *Shard) setCustom(c *cur, start uint64, timeoutNs int64) {
	c.word |= flagCustom
	s.custom[c.root] = custom{start: start, timeout: timeoutNs}
}

// step applies one message to c, appending any outcome to out. It is the
// whole of SEMANTICS.md's rules for one message; the batch paths only
// decide how messages are grouped around it.
func (s *Shard) step(c *cur, m *Msg, out []Outcome) []Outcome {
	if !m.Valid() {
		s.stats.RefusedInvalid++
		return append(out, m.InvalidOutcome())
	}
	switch m.Kind {
	case Init:
		s.stats.Inits++
		to := s.defNs
		if m.TimeoutMs != 0 {
			to = int64(m.TimeoutMs) * int64(time.Millisecond)
		}
		if !c.live {
			if m.Val == 0 { // rule 4: a tuple with no recipients; nothing to track
				s.stats.Completed++
				return append(out, Outcome{Root: m.Root, Task: m.Task, Kind: Completed})
			}
			if !s.create(c, m.Val, flagInit|m.Task, to) {
				s.stats.FailedFull++
				return append(out, Outcome{Root: m.Root, Task: m.Task, Kind: Failed, Reason: ReasonFull})
			}
			if m.TimeoutMs != 0 {
				s.setCustom(c, s.nowStart(), to)
			}
			return out
		}
		// The entry exists: made by earlier ACK/FAIL/RESET, or a repeated INIT.
		if m.TimeoutMs == 0 && c.word&flagCustom != 0 {
			to = s.custom[c.root].timeout // a timeout a RESET set before the INIT
		}
		c.val ^= m.Val
		c.word = c.word&^taskMask | flagInit | m.Task
		c.resched, c.deadline = true, s.deadlineAfter(to)
		if to != s.defNs || c.word&flagCustom != 0 {
			s.setCustom(c, s.nowStart(), to)
		}
		switch {
		case c.word&flagFailed != 0: // rule 3: the FAIL that came first wins
			s.kill(c)
			s.stats.FailedExplicit++
			return append(out, Outcome{Root: m.Root, Task: m.Task, Kind: Failed, Reason: ReasonExplicit})
		case c.val == 0:
			s.kill(c)
			s.stats.Completed++
			return append(out, Outcome{Root: m.Root, Task: m.Task, Kind: Completed})
		}
		return out

	case Ack:
		s.stats.Acks++
		if !c.live {
			if !s.create(c, m.Val, 0, s.defNs) {
				s.stats.RefusedFull++
				return append(out, Outcome{Root: m.Root, Task: NoTask, Kind: Refused, Reason: ReasonFull})
			}
			return out
		}
		c.val ^= m.Val
		if c.val == 0 && c.word&flagInit != 0 {
			lat := s.latency(s.start(c))
			task := c.word & taskMask
			s.kill(c)
			s.stats.Completed++
			return append(out, Outcome{Root: m.Root, Task: task, Kind: Completed, Latency: lat})
		}
		return out

	case Fail:
		s.stats.Fails++
		if !c.live {
			if !s.create(c, 0, flagFailed, s.defNs) {
				s.stats.RefusedFull++
				return append(out, Outcome{Root: m.Root, Task: NoTask, Kind: Refused, Reason: ReasonFull})
			}
			return out
		}
		if c.word&flagInit == 0 {
			c.word |= flagFailed // remembered until the INIT (rule 3) or expiry (rule 6)
			return out
		}
		lat := s.latency(s.start(c))
		task := c.word & taskMask
		s.kill(c)
		s.stats.FailedExplicit++
		return append(out, Outcome{Root: m.Root, Task: task, Kind: Failed, Reason: ReasonExplicit, Latency: lat})

	default: // Reset
		s.stats.Resets++
		to := int64(m.TimeoutMs) * int64(time.Millisecond)
		if !c.live {
			if to == 0 {
				to = s.defNs
			}
			if !s.create(c, 0, 0, to) {
				s.stats.RefusedFull++
				return append(out, Outcome{Root: m.Root, Task: NoTask, Kind: Refused, Reason: ReasonFull})
			}
			if to != s.defNs {
				s.setCustom(c, 0, to)
			}
			return out
		}
		if to == 0 {
			to = s.timeoutNs(c)
		}
		if c.word&flagCustom == 0 && (to != s.defNs || c.word&flagInit != 0) {
			// The deadline moves away from start+default: keep start aside.
			s.setCustom(c, s.currentDeadline(c)-s.defTicks, to)
		} else if c.word&flagCustom != 0 {
			cu := s.custom[c.root]
			cu.timeout = to
			s.custom[c.root] = cu
		}
		c.resched, c.deadline = true, s.deadlineAfter(to)
		return out
	}
}

// Apply applies msgs in order and appends the outcomes they cause to out,
// which it returns. Each message causes at most one outcome, so an out with
// spare capacity len(msgs) is never grown and Apply allocates nothing.
// Malformed messages are answered with Refused{invalid} and counted.
func (s *Shard) Apply(msgs []Msg, out []Outcome) []Outcome {
	s.setNow()
	if s.fold == FoldOn {
		return s.applyFolded(msgs, out)
	}
	// Software pipeline: hash chunk k+1 and prefetch its lines, then apply
	// chunk k, whose lines were prefetched one chunk earlier. Chunks start
	// small and double up to prefetchChunk, so that the first messages of a
	// call, which nothing prefetched ahead, are few.
	if !s.prefetch {
		if haveAckRun {
			return s.applyRun(msgs, out)
		}
		return s.applyChunk(msgs, nil, out)
	}
	if len(msgs) == 0 {
		return out
	}
	cur, size := 0, firstChunk
	next := msgs[:min(len(msgs), size)]
	s.homes(next, &s.hs[cur])
	for len(msgs) > 0 {
		chunk := next
		msgs = msgs[len(chunk):]
		size = min(2*size, prefetchChunk)
		next = msgs[:min(len(msgs), size)]
		if len(next) > 0 {
			s.homes(next, &s.hs[cur^1])
		}
		if haveAckRun {
			out = s.applyRun(chunk, out)
		} else {
			out = s.applyChunk(chunk, &s.hs[cur], out)
		}
		cur ^= 1
	}
	return out
}

// firstChunk is the size of a call's first chunk (see Apply).
const firstChunk = 8

// homes computes the home slot of each message of chunk into hs and, for
// tables larger than L2, prefetches the lines of their probe windows.
func (s *Shard) homes(chunk []Msg, hs *[prefetchChunk]uint64) {
	k, n := s.t.keys, s.t.n
	for i := range chunk {
		hs[i], _ = bits.Mul64(mix(chunk[i].Root, &k), n)
	}
	if s.prefetch && len(chunk) > 0 {
		prefetchSlots(&s.t.e[0], &hs[0], len(chunk))
	}
}

// prefetchChunk is how many messages' table lines are prefetched ahead of
// applying them: enough to keep the ~30 misses one core sustains in flight,
// few enough that the lines are still in L1 when their turn comes. A power
// of two.
const prefetchChunk = 64

func (s *Shard) applyChunk(chunk []Msg, hs *[prefetchChunk]uint64, out []Outcome) []Outcome {
	for i := 0; ; i++ {
		var slot uint64
		i, slot = s.fastPath(chunk, hs, i)
		if i == len(chunk) {
			return out
		}
		m := &chunk[i]
		if e := &s.t.e[slot]; m.Kind == Ack && e.key != 0 && e.word()&(flagInit|flagCustom|flagNear) == flagInit {
			// The ACK that completes a root with the default timeout and
			// no near timer (fastPath stops at completing ACKs only): what
			// step and store would do, without loading a cur.
			s.stats.Acks++
			s.stats.Completed++
			start := s.expand(uint32(e.meta)) - s.defTicks
			out = append(out, Outcome{Root: e.key, Task: e.word() & taskMask, Kind: Completed, Latency: s.latency(start)})
			s.removeSlot(int(slot))
			if invariants.Enabled {
				s.check()
			}
			continue
		}
		out = s.slow(m, int(slot), out)
	}
}

// fastPath is the portable hot loop, for CPUs without ackRun (see
// applyRun and ackrun_amd64.s). It applies chunk[i:] for as long as each
// message is one of the two
// kinds that make nearly all traffic and touch nothing but their slot: an
// ACK to an existing entry that does not complete it (writes one val), and
// an INIT of a new root with the default timeout, far from due (writes one
// slot). It returns the index of the first message it did not apply
// (len(chunk) if none) and the slot where that message's probe ended. It
// calls nothing, so that its loop keeps everything in registers.
//
// hs holds the chunk's home slots, computed (and prefetched) a chunk
// ahead; nil means fastPath hashes each root itself.
func (s *Shard) fastPath(chunk []Msg, hs *[prefetchChunk]uint64, i int) (next int, slot uint64) {
	es, k := s.t.e, s.t.keys
	n := uint64(len(es))
	acks := uint64(0)
	for ; i < len(chunk); i++ {
		m := &chunk[i]
		root := m.Root
		if root == 0 { // invalid; and a probe for 0 would match an empty slot
			break
		}
		// The probe, from the home slot to the root or the first empty
		// slot, written out here (MEASURING.md: an inlined probe nearly
		// doubles throughput at large tables).
		var j uint64
		if hs != nil {
			j = hs[i&(prefetchChunk-1)]
		} else {
			j, _ = bits.Mul64(mix(root, &k), n)
		}
		if j+probeWindow <= n {
			// The first probeWindow slots, compared without branches: a
			// probe's length is random, so a loop over slots mispredicts
			// its exit on about half of all lookups.
			w := (*[probeWindow]entry)(es[j : j+probeWindow])
			k0, k1, k2, k3 := w[0].key, w[1].key, w[2].key, w[3].key
			f := b2u(k0 == root) | b2u(k0 == 0) | (b2u(k1 == root)|b2u(k1 == 0))<<1 |
				(b2u(k2 == root)|b2u(k2 == 0))<<2 | (b2u(k3 == root)|b2u(k3 == 0))<<3 | 1<<probeWindow
			if j += uint64(bits.TrailingZeros(f)); j == n {
				j = 0
			}
		}
		for {
			if k := es[j].key; k == root || k == 0 {
				break
			}
			if j++; j == n {
				j = 0
			}
		}
		e := &es[j]
		if e.key != 0 {
			if m.Kind != Ack {
				slot = j
				break
			}
			nv := e.val ^ m.Val
			if nv == 0 && e.meta&(uint64(flagInit)<<32) != 0 {
				slot = j
				break // completes the root
			}
			e.val = nv
			acks++
			continue
		}
		if m.Kind != Init || m.TimeoutMs != 0 || m.Val == 0 || m.Task > MaxTask ||
			s.t.count >= s.maxPending || s.defDeadline < s.limit {
			slot = j
			break
		}
		// insertSlot, written out: the Robin Hood position p, then the run
		// from p to j shifted forward by one. A shift round the end of the
		// table while a pass runs may cross the pass: left to slow.
		p, d := j, uint64(0)
		if h, _ := bits.Mul64(mix(root, &k), n); h != j {
			for p = h; p != j; d++ {
				rd := es[p].storedDist()
				if rd == distSat {
					break // a distance to recompute: left to slow
				}
				if rd < d {
					break
				}
				if p++; p == n {
					p = 0
				}
			}
			if d >= distSat-1 || p != j && (es[p].storedDist() == distSat || p > j && s.scan >= 0) {
				slot = j // rare: saturated distances, or a shift that may cross a pass
				break
			}
			shiftUp(es, p, j)
		}
		es[p] = entry{key: root, val: m.Val, meta: uint64(flagInit|m.Task)<<32 | d<<(32+distShift) | uint64(uint32(s.defDeadline))}
		s.t.count++
		s.stats.Inits++
		if invariants.Enabled {
			s.check()
		}
	}
	s.stats.Acks += acks
	return i, slot
}

// slow applies m, whose probe ended at slot, through step: everything but
// the fast path of applyChunk.
//
//go:noinline
func (s *Shard) slow(m *Msg, slot int, out []Outcome) []Outcome {
	var c cur
	if m.Root == 0 {
		return s.step(&c, m, out)
	}
	if e := &s.t.e[slot]; e.key == 0 {
		c = cur{root: m.Root, slot: slot}
	} else {
		c = cur{root: m.Root, slot: slot, inTable: true, live: true, val: e.val, word: e.word()}
	}
	out = s.step(&c, m, out)
	s.store(&c)
	return out
}

// Expire reports the roots whose deadline has passed, appending at most
// cap(out)-len(out) outcomes; more is true when it stopped for lack of room
// and further roots may be due. Roots that never saw INIT are dropped
// silently and counted as orphans (rule 6).
func (s *Shard) Expire(out []Outcome) (_ []Outcome, more bool) {
	s.setNow()
	s.advanceNear()
	for len(out) < cap(out) {
		h, deadline, ok := s.near.ExpireDeadline(s.nowTick)
		if !ok {
			return out, false
		}
		root := s.nearRoots[h]
		s.releaseNear(h)
		slot, found := s.t.find(root)
		if !found || s.t.e[slot].meta != uint64(s.t.e[slot].word()|flagNear)<<32|uint64(h) {
			if invariants.Enabled {
				panic(fmt.Sprintf("ackcore: near timer %d fired for root %#x, not in the table with that timer", h, root))
			}
			continue
		}
		e := &s.t.e[slot]
		e.meta &^= uint64(flagNear) << 32 // its timer just fired
		c := cur{root: root, slot: slot, inTable: true, word: e.word(), deadline: deadline, resched: true}
		if c.word&flagInit != 0 {
			lat := s.latency(s.start(&c))
			s.stats.FailedTimeout++
			out = append(out, Outcome{Root: c.root, Task: c.word & taskMask, Kind: Failed, Reason: ReasonTimeout, Latency: lat})
		} else {
			s.stats.Orphans++
		}
		if c.word&flagCustom != 0 {
			delete(s.custom, c.root)
		}
		s.removeSlot(slot)
		if invariants.Enabled {
			s.check()
		}
	}
	return out, true
}

// ExpireAll is Expire without a room limit: it appends every due outcome,
// growing out as needed.
func (s *Shard) ExpireAll(out []Outcome) []Outcome {
	for {
		if cap(out)-len(out) < 64 {
			out = append(out, make([]Outcome, 64)...)[:len(out)]
		}
		var more bool
		out, more = s.Expire(out)
		if !more {
			return out
		}
	}
}

// StopAll empties the shard: every pending root with an INIT is reported
// Failed{stopped} (appended to out, which grows as needed), the others are
// counted as orphans. The shard stays usable.
func (s *Shard) StopAll(out []Outcome) []Outcome {
	s.setNow()
	for slot := range s.t.e {
		for s.t.e[slot].key != 0 { // a remove may shift another entry into slot
			e := &s.t.e[slot]
			c := cur{root: e.key, slot: slot, inTable: true, live: true, word: e.word()}
			if c.word&flagInit != 0 {
				s.stats.FailedStopped++
				out = append(out, Outcome{Root: c.root, Task: c.word & taskMask, Kind: Failed, Reason: ReasonStopped, Latency: s.latency(s.start(&c))})
			} else {
				s.stats.Orphans++
			}
			s.kill(&c)
			s.store(&c)
		}
	}
	return out
}

// probeWindow is the number of slots fastPath compares at once before it
// walks on slot by slot.
const probeWindow = 4

// b2u is 1 for true (SETcc on amd64): four of these make fastPath's window
// mask without branches.
func b2u(b bool) uint {
	if b {
		return 1
	}
	return 0
}
