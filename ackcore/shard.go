package ackcore

import (
	"cmp"
	"fmt"
	"math/bits"
	"time"

	"github.com/xorack/xorack/internal/bytesize"
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
// adds instructions (measured on a 2-vCPU Zen 5 VM: dependent random loads
// take 9.5 ns over 1 MiB, 145 ns over 16 MiB).
const prefetchAbove = 1 << 20

// Config configures a Shard.
type Config struct {
	// MaxPending bounds the entries pending at once, with or without INIT
	// (rule 10 of docs/semantics.md). Required. The table is allocated for
	// it up front.
	MaxPending int
	// Timeout is the default per-root timeout; 0 means DefaultTimeout.
	Timeout time.Duration
	// Tick is the timer resolution; 0 means DefaultTick.
	Tick time.Duration
	// Clock is the time source; nil means a new MonotonicClock.
	Clock Clock
	// Fold selects batch folding.
	Fold FoldMode
	// MaxBytes is the memory budget: NewShard refuses a configuration whose
	// worst case (Bytes) exceeds it, before allocating anything. 0 means
	// DefaultMaxBytes.
	MaxBytes int64
	// ProgressTimeout makes a root's timeout count from its last progress
	// (its INIT or any ACK of it) instead of from its INIT, so that a tree
	// that is making progress behind a slow bolt does not time out, while
	// one with a tuple stuck still times out one timeout after its last
	// ACK. Progress keeps a root alive for at most ProgressCap after its
	// INIT. It costs one 32-bit store per ACK and 4 bytes a slot (see
	// progress.go); off by default.
	ProgressTimeout bool
	// ProgressCap is the longest progress keeps a root alive after its
	// INIT; 0 means DefaultProgressCap times Timeout (Storm's and the
	// engine's RESET cap), at most MaxTimeout. Only with ProgressTimeout.
	ProgressCap time.Duration
	// Owners is the number of senders the shard tells apart (owners.go):
	// the embedder's producers, named per batch by SetOwner. 0 means 1; at
	// most MaxOwners.
	Owners int
	// OrphanShare is the most orphans (entries made by an ACK, FAIL or
	// RESET for a root with no entry) one owner may have in the table; the
	// owner's next such message is refused (Stats.OrphansRefused). 0, the
	// default, means no bound but the table's (SetOrphanShare changes it).
	OrphanShare int
	// Seed fixes the table's hash keys, for reproducible tests and
	// benchmarks. 0, the default, draws secret keys from crypto/rand: keep
	// it so wherever root ids may come from outside, since roots chosen
	// with the keys known can all share one home slot (see hash.go).
	Seed uint64
}

// MaxPendingLimit is the largest MaxPending a shard accepts: near-wheel
// timer handles (at most one per entry) are 32-bit. The memory budget
// (Config.MaxBytes) is usually the tighter limit.
const MaxPendingLimit = timerwheel.MaxCapacity / maxLoadDen * maxLoadNum

// MinTick is the finest Tick a shard accepts: the longest timeout,
// MaxTimeout, must stay within the timer wheel's reach (MaxDelay ticks),
// and a deadline stored as a 32-bit tick must be recovered exactly.
const MinTick = 100 * time.Microsecond

// DefaultMaxBytes is the memory budget of a shard whose Config.MaxBytes is
// 0: 1 GiB, enough for MaxPending 6.9 million at the worst case
// Config.Bytes counts (155 bytes a root); on the common paths such a shard
// holds about 250 MB.
const DefaultMaxBytes = 1 << 30

// Validate checks c, with an error naming the bad value. NewShard calls it;
// an embedder that builds shards later (the sharded acker) calls it first.
// It allocates nothing: a configuration whose memory bound (Bytes) exceeds
// its budget (MaxBytes) is refused with both figures before anything is
// allocated.
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
		if tick == 0 {
			return fmt.Errorf("ackcore: Timeout %v is not a whole number of ticks (Tick %v, the default)", to, DefaultTick)
		}
		return fmt.Errorf("ackcore: Timeout %v is not a whole number of ticks (Tick %v)", to, tick)
	}
	if c.Fold > FoldOn {
		return fmt.Errorf("ackcore: unknown Fold mode %d", c.Fold)
	}
	if c.Owners < 0 || c.Owners > MaxOwners {
		return fmt.Errorf("ackcore: Owners %d out of range [0, %d]", c.Owners, MaxOwners)
	}
	if c.OrphanShare < 0 {
		return fmt.Errorf("ackcore: OrphanShare %d is negative", c.OrphanShare)
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("ackcore: MaxBytes %d is negative", c.MaxBytes)
	}
	if c.ProgressCap != 0 && !c.ProgressTimeout {
		return fmt.Errorf("ackcore: ProgressCap %v without ProgressTimeout", c.ProgressCap)
	}
	if c.ProgressCap < 0 || c.ProgressCap > MaxTimeout {
		return fmt.Errorf("ackcore: ProgressCap %v out of range [0, %v]", c.ProgressCap, MaxTimeout)
	}
	if tick := cmp.Or(c.Tick, DefaultTick); c.ProgressCap%tick != 0 {
		return fmt.Errorf("ackcore: ProgressCap %v is not a whole number of ticks (Tick %v)", c.ProgressCap, tick)
	}
	if b, budget := c.Bytes(), c.maxBytes(); b > budget {
		return fmt.Errorf("ackcore: MaxPending %d needs up to %s, %s of it for the table (allocated up front), over the memory budget MaxBytes %s", c.MaxPending, bytesize.Of(b), bytesize.Of(c.tableBytes()), bytesize.Of(budget))
	}
	return nil
}

func (c *Config) maxBytes() int64 {
	if c.MaxBytes == 0 {
		return DefaultMaxBytes
	}
	return c.MaxBytes
}

// tableBytes is the slot array NewShard allocates up front for c.
func (c *Config) tableBytes() int64 {
	return int64(tableSlots(c.MaxPending)) * entryBytes
}

// Bytes is the most memory a shard with configuration c can hold, checked
// against MaxBytes before anything is allocated: the slot array (24 bytes
// a slot, 1.5 slots per pending root, allocated up front) and the ext
// array (2 bytes a slot); for every entry it may hold (MaxPending and the
// FAIL reserve), at worst, a near-wheel timer (24 bytes), two due-list
// records (8 bytes each, 9 with their chunk), a side-table record (24
// bytes, 72 at the table's lowest load) and two places in the orphan FIFO
// (8 bytes each, orphans.go); the FAIL filter; 12 bytes per owner
// (owners.go); and 64 KiB for
// the fixed parts (wheel sentinels, due-list buckets, spare chunks). On
// the common paths (default or in-slot timing, deadlines far away) a shard
// holds about 36 bytes per pending root, 39 with per-root timeouts or
// RESETs; TableBytes says what it holds.
func (c *Config) Bytes() int64 {
	entries := int64(c.MaxPending + failReserveFor(c.MaxPending))
	slots := int64(tableSlots(c.MaxPending))
	const perEntry = timerwheel.NodeBytes + 8 + 4 + 2*9 + 3*sideRecBytes + 2*8
	const fixed = 64 << 10
	b := slots*(entryBytes+2) + entries*perEntry + int64(filterBits(c.MaxPending))/4 + ownerBytes(c.Owners) + fixed
	if c.ProgressTimeout {
		b += slots * 4 // progress.go
	}
	return b
}

// Shard is a single-writer acker: one goroutine owns it and calls Apply and
// Expire; nothing in it is safe for concurrent use. See doc.go.
type Shard struct {
	t          table
	clock      Clock
	timing                // start and timeout beside the deadline (timing.go)
	nearTimers            // deadlines due soon (near.go)
	fails      failFilter // FAILs over the bound (failfilter.go)
	orphanQ    orphanFIFO // roots of entries without INIT, oldest first (orphans.go)
	orphans    int        // entries without INIT now in the table
	progress              // last progress per slot, with ProgressTimeout (progress.go)
	// Folding (fold.go): orphans made in a chunk are queued after it, in
	// message order; msgIdx is the index of the message being stepped.
	deferOrphans bool
	msgIdx       int

	tickNs      int64
	defNs       int64  // default timeout, ns
	defTicks    uint64 // default timeout in whole ticks
	defMs       uint32 // the default timeout in ms when that is whole (a TimeoutMs that asks for the default), else 0
	maxPending  int
	failReserve int // entries FAILs may make beyond maxPending
	fold        FoldMode

	// Per-call time, set at the top of Apply and Expire.
	nowNs       int64
	nowTick     uint64
	defDeadline uint64 // deadlineAfter(defNs) at nowNs
	skewNs      int64  // how far the shard's time lags the clock's (jumps beyond maxStepTicks)

	stats    Stats
	fs       *foldScratch
	prefetch bool                     // prefetch table lines a chunk ahead (large tables only)
	hs       [2][prefetchChunk]uint64 // home slots of the chunk being applied and the next

	// Owners (owners.go): the owner of the messages being applied, the
	// shift of the owner in an orphan's word, each owner's orphans now and
	// refusals, and the most orphans an owner may have.
	owner        int
	ownerShift   uint8
	ownerOrphans []int32
	ownerRefused []uint64
	orphanShare  int
}

// maxStepTicks is the most a shard's time moves in one call. A clock that
// jumps further (a machine suspended for weeks) is taken to have jumped
// this far: every root pending at the jump times out (no deadline is 2^29
// ticks away: MaxTimeout is at most 2^30 ticks at MinTick, 2^27 at 1 ms),
// none times out early, and the 32-bit deadlines in the table, recovered
// relative to now, stay unambiguous. Latencies that span the jump are
// understated by the excess.
const maxStepTicks = 1 << 29

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
		t:           newTable(cfg.MaxPending, newKeys(cfg.Seed)),
		clock:       cfg.Clock,
		tickNs:      int64(cfg.Tick),
		defNs:       int64(cfg.Timeout),
		maxPending:  cfg.MaxPending,
		failReserve: failReserveFor(cfg.MaxPending),
		fold:        cfg.Fold,
	}
	s.side.keys = &s.t.keys
	s.initOwners(cfg)
	s.defTicks = uint64(s.defNs / s.tickNs)
	if s.defNs%int64(time.Millisecond) == 0 {
		s.defMs = uint32(s.defNs / int64(time.Millisecond))
	}
	s.nowNs = max(int64(s.clock.Now()), 0)
	s.setNow()
	s.fails.span = max(s.defTicks, 1)
	s.fails.gen = s.nowTick / s.fails.span
	s.initNear()
	if cfg.Fold == FoldOn {
		s.fs = new(foldScratch)
	}
	s.prefetch = s.t.bytes() > prefetchAbove
	if cfg.ProgressTimeout {
		s.initProgress(cfg)
	}
	return s, nil
}

func (s *Shard) setNow() {
	ns := int64(s.clock.Now()) - s.skewNs
	if ns < s.nowNs {
		ns = s.nowNs // a clock that steps back: time stands still
	}
	if step, most := ns-s.nowNs, maxStepTicks*s.tickNs; step > most {
		s.skewNs += step - most // a jump: see maxStepTicks
		ns = s.nowNs + most
	}
	s.nowNs = ns
	s.nowTick = uint64(ns / s.tickNs)
	s.defDeadline = uint64((ns + s.defNs + s.tickNs - 1) / s.tickNs)
	if s.prog != nil {
		s.progNow = uint32(s.nowStart())
	}
	if s.fails.active() {
		s.fails.rotate(s.nowTick)
	}
}

// fastInit reports whether INITs of new roots may take the fast paths: the
// default deadline is far (no near timer needed) and no FAIL is held in
// the filter (every INIT would have to be checked).
func (s *Shard) fastInit() bool { return s.defDeadline >= s.limit && !s.fails.active() }

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

// TableBytes is the memory the shard holds now: the table, the ext array
// and side map (timing.go), the near wheel and due lists (near.go), the
// orphan FIFO (orphans.go), the FAIL filter, the progress ticks
// (progress.go) and the per-owner counters (owners.go). (Folding adds a fixed 5
// KiB of scratch.)
func (s *Shard) TableBytes() int {
	return s.t.bytes() + s.timingBytes() + s.nearBytes() + s.orphanQ.bytes() + s.fails.bytes() + s.progressBytes() + int(ownerBytes(len(s.ownerOrphans)))
}

// cur is one root's entry while a group of its messages is applied: loaded
// from the table once, stepped per message, stored once.
type cur struct {
	root    uint64
	slot    int  // the entry's slot when inTable, else the empty slot its probe ended at
	inTable bool // the table held the entry when the group began
	live    bool // the entry exists now
	resched bool // deadline, start or timeout changed: rewrite them on store
	timed   bool // deadline, start and timeout hold the entry's timing
	made    bool // the entry was (re)made in this group (create)
	madeIdx int  // folding: the index in its chunk of the message that made it
	// progressed: an INIT or ACK reached the entry in this group (its
	// last progress, for ProgressTimeout, is now).
	progressed bool
	val        uint64
	word       uint32 // flagInit | task, or flagFailed; the other bits are the table's

	deadline uint64 // tick
	start    uint64 // tick: the INIT's, or the entry's creation without INIT
	timeout  int64  // ns
}

// load begins a group: one probe for root.
func (s *Shard) load(c *cur, root uint64) {
	slot, found := s.t.find(root)
	s.loadAt(c, root, slot, found)
}

// loadAt begins a group for root whose probe ended at slot.
func (s *Shard) loadAt(c *cur, root uint64, slot int, found bool) {
	*c = cur{root: root, slot: slot, inTable: found, live: found}
	if found {
		e := &s.t.e[slot]
		c.val, c.word = e.val, e.word()&(flagInit|taskMask)
	}
}

// timing fills c's deadline, start and timeout from the table, if not
// already known.
func (s *Shard) loadTiming(c *cur) {
	if c.timed || !c.inTable {
		return
	}
	e := &s.t.e[c.slot]
	c.deadline = s.deadlineOf(e)
	c.start, c.timeout = s.startTimeout(c.slot, e, c.deadline)
	c.timed = true
}

// begin sets c's timing for a (re)start now with the given timeout, with
// start as the start tick.
func (s *Shard) begin(c *cur, start uint64, timeout int64) {
	c.start, c.timeout, c.deadline = start, timeout, s.deadlineAfter(timeout)
	c.resched, c.timed = true, true
}

// store ends a group: it writes c back, removes it, or inserts it, and
// keeps the orphan count and FIFO (orphans.go) right: an entry without
// INIT made in this group is a new orphan, queued with a new tag.
func (s *Shard) store(c *cur) {
	wasOrphan := c.inTable && s.t.e[c.slot].word()&flagInit == 0
	isOrphan := c.live && c.word&flagInit == 0
	if wasOrphan && (!isOrphan || c.made) {
		s.orphanGone(s.t.e[c.slot].word()) // its INIT came, or it ended (and another began)
	}
	if isOrphan && (!wasOrphan || c.made) {
		s.orphans++
		s.ownerOrphans[s.owner]++
		c.word = c.word&flagFailed | uint32(s.owner)<<s.ownerShift
		if s.deferOrphans {
			s.fs.orphans = append(s.fs.orphans, deferredOrphan{c.root, int16(c.madeIdx)}) // tagged when the chunk is done (fold.go)
		} else {
			c.word |= s.queueOrphan(c.root)
		}
	}
	switch {
	case c.inTable && c.live:
		e := &s.t.e[c.slot]
		if c.progressed && s.prog != nil {
			s.prog[c.slot] = uint32(s.nowStart())
		}
		e.val = c.val
		keep := ^(flagInit | taskMask)
		e.meta = uint64(c.word|e.word()&keep)<<32 | e.meta&0xffffffff
		if c.resched {
			s.setTiming(c.slot, e, c.deadline, c.start, c.timeout)
			s.setDeadline(e, c.deadline)
		}
	case c.inTable:
		s.dropEntry(c.slot)
	case c.live:
		slot := int(s.insertSlot(c.root, uint64(c.slot)))
		e := &s.t.e[slot]
		if s.prog != nil {
			s.prog[slot] = uint32(s.nowStart()) // made now: its first progress
		}
		e.val = c.val
		e.meta |= uint64(c.word) << 32
		s.setTiming(slot, e, c.deadline, c.start, c.timeout)
		s.setDeadline(e, c.deadline)
	}
	if invariants.Enabled {
		s.check()
	}
}

// dropEntry removes the entry in slot with what it keeps elsewhere: its
// near timer, its ext or side-map timing.
func (s *Shard) dropEntry(slot int) {
	e := &s.t.e[slot]
	if e.word()&flagNear != 0 {
		s.freeNear(uint32(e.meta))
	}
	s.dropTiming(e)
	s.removeSlot(slot)
}

// moveSide moves what the arrays beside the slots (ext, prog) hold for
// slot from to slot to, with the entry.
func (s *Shard) moveSide(to, from uint64) {
	if s.ext != nil {
		s.ext[to] = s.ext[from]
	}
	if s.prog != nil {
		s.prog[to] = s.prog[from]
	}
}

// removeSlot empties slot i and restores Robin Hood order: the entries
// after the hole move back one slot each, up to an empty slot or an entry
// in its home slot. ext moves with them.
func (s *Shard) removeSlot(i int) {
	t := &s.t
	es, n := t.e, t.n
	side := s.ext != nil || s.prog != nil // arrays beside the slots, moved with them
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
		if side {
			s.moveSide(hole, j)
		}
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
// ext moves with them.
func (s *Shard) shiftUp(p, z uint64) {
	es := s.t.e
	side := s.ext != nil || s.prog != nil // arrays beside the slots, moved with them
	for q := z; q != p; {
		pq := q - 1
		if q == 0 {
			pq = uint64(len(es)) - 1
		}
		es[q] = es[pq]
		if side {
			s.moveSide(q, pq)
		}
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
	s.shiftUp(p, z)
	if p > z && s.scan > 0 {
		s.rescan(&es[0]) // moved round the end, behind a running pass
	}
	es[p] = entry{key: root, meta: min(d, distSat) << (32 + distShift)}
	t.count++
	return p
}

// nowStart is the start tick recorded for an INIT (or a creation) now: the
// tick boundary at or after now, the same rounding deadlineAfter uses, so
// that a default entry's start is exactly its deadline minus the default
// timeout.
func (s *Shard) nowStart() uint64 { return uint64((s.nowNs + s.tickNs - 1) / s.tickNs) }

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

// create makes c a new entry (rule 7 when the message is not an INIT),
// unless bound entries exist already; store inserts it. The caller sets
// its val, word and timing.
func (s *Shard) create(c *cur, bound int) bool {
	if !c.inTable && s.t.count >= bound {
		return false
	}
	c.live, c.made, c.madeIdx = true, true, s.msgIdx
	return true
}

// kill removes c's entry (on store).
func (s *Shard) kill(c *cur) {
	c.live = false
	c.resched = false
}

// msgTimeout is the timeout m asks for in ns, 0 for none.
func msgTimeout(m *Msg) int64 { return int64(m.TimeoutMs) * int64(time.Millisecond) }

// step applies one message to c, appending any outcome to out. It is the
// whole of the contract's rules for one message (docs/semantics.md); the
// batch paths only decide how messages are grouped around it.
func (s *Shard) step(c *cur, m *Msg, out []Outcome) []Outcome {
	if !m.Valid() {
		s.stats.RefusedInvalid++
		return append(out, m.InvalidOutcome())
	}
	switch m.Kind {
	case Init:
		s.stats.Inits++
		to := msgTimeout(m)
		if !c.live {
			if s.fails.active() && s.fails.has(mix(m.Root, &s.t.keys)) { // rule 3: a FAIL held at the bound
				s.stats.FailedExplicit++
				return append(out, Outcome{Root: m.Root, Task: m.Task, Kind: Failed, Reason: ReasonExplicit})
			}
			if m.Val == 0 { // rule 4: a tuple with no recipients; nothing to track
				s.stats.Completed++
				return append(out, Outcome{Root: m.Root, Task: m.Task, Kind: Completed})
			}
			if !s.create(c, s.maxPending) && !s.makeRoom(c) {
				s.stats.FailedFull++
				return append(out, Outcome{Root: m.Root, Task: m.Task, Kind: Failed, Reason: ReasonFull})
			}
			if to == 0 {
				to = s.defNs
			}
			c.val, c.word = m.Val, flagInit|m.Task
			s.begin(c, s.nowStart(), to)
			return out
		}
		// The entry exists: made by earlier ACK/FAIL/RESET, or a repeated INIT.
		s.loadTiming(c)
		if to == 0 {
			to = c.timeout // the default, or a timeout a RESET set before the INIT
		}
		failed := c.word&flagInit == 0 && (c.word&flagFailed != 0 || s.fails.active() && s.fails.has(mix(m.Root, &s.t.keys)))
		c.val ^= m.Val
		c.word = flagInit | m.Task
		c.progressed = true
		s.begin(c, s.nowStart(), to)
		switch {
		case failed: // rule 3: the FAIL that came first wins
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
			if s.ownerFull() {
				return s.refuseOrphan(m, out)
			}
			if !s.create(c, s.maxPending) && !s.makeRoom(c) {
				s.stats.RefusedFull++
				return append(out, Outcome{Root: m.Root, Task: NoTask, Kind: Refused, Reason: ReasonFull})
			}
			c.val, c.word = m.Val, 0
			s.begin(c, s.nowStart(), s.defNs)
			return out
		}
		c.val ^= m.Val
		c.progressed = true
		if c.val == 0 && c.word&flagInit != 0 {
			s.loadTiming(c)
			lat := s.latency(c.start)
			task := c.word & taskMask
			s.kill(c)
			s.stats.Completed++
			return append(out, Outcome{Root: m.Root, Task: task, Kind: Completed, Latency: lat})
		}
		return out

	case Fail:
		s.stats.Fails++
		if !c.live {
			if s.ownerFull() {
				return s.refuseOrphan(m, out)
			}
			if !s.create(c, s.maxPending+s.failReserve) {
				// Rule 3 at the bound: held in the filter within its
				// budget, else dropped (the root times out).
				s.holdFail(m.Root)
				return out
			}
			if !c.inTable && s.t.count >= s.maxPending {
				s.stats.FailsReserved++
			}
			c.val, c.word = 0, flagFailed // remembered until the INIT (rule 3) or expiry (rule 6)
			s.begin(c, s.nowStart(), s.defNs)
			return out
		}
		if c.word&flagInit == 0 {
			c.word |= flagFailed
			return out
		}
		s.loadTiming(c)
		lat := s.latency(c.start)
		task := c.word & taskMask
		s.kill(c)
		s.stats.FailedExplicit++
		return append(out, Outcome{Root: m.Root, Task: task, Kind: Failed, Reason: ReasonExplicit, Latency: lat})

	default: // Reset
		s.stats.Resets++
		to := msgTimeout(m)
		if !c.live {
			if s.ownerFull() {
				return s.refuseOrphan(m, out)
			}
			if !s.create(c, s.maxPending) && !s.makeRoom(c) {
				s.stats.RefusedFull++
				return append(out, Outcome{Root: m.Root, Task: NoTask, Kind: Refused, Reason: ReasonFull})
			}
			if to == 0 {
				to = s.defNs
			}
			c.val, c.word = 0, 0
			s.begin(c, s.nowStart(), to)
			return out
		}
		s.loadTiming(c)
		if to == 0 {
			to = c.timeout
		}
		s.begin(c, c.start, to) // the start stays: latency runs from the INIT (or the creation)
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
	run := haveAckRun && s.prog == nil // ackRun keeps no progress
	if !s.prefetch {
		if run {
			return s.applyRun(msgs, nil, out)
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
		if run {
			out = s.applyRun(chunk, &s.hs[cur], out)
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
		if e := &s.t.e[slot]; m.Kind == Ack && e.key != 0 && e.word()&(flagInit|kindMask|flagNear) == flagInit {
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
// an INIT of a new root with the default timeout (TimeoutMs 0 or equal to
// the default), far from due (writes one slot). It returns the index of the first message it did not apply
// (len(chunk) if none) and the slot where that message's probe ended. It
// calls nothing, so that its loop keeps everything in registers.
//
// hs holds the chunk's home slots, computed (and prefetched) a chunk
// ahead; nil means fastPath hashes each root itself.
func (s *Shard) fastPath(chunk []Msg, hs *[prefetchChunk]uint64, i int) (next int, slot uint64) {
	es, k := s.t.e, s.t.keys
	n := uint64(len(es))
	acks := uint64(0)
	fastInit := s.fastInit()
	for ; i < len(chunk); i++ {
		m := &chunk[i]
		root := m.Root
		if root == 0 { // invalid; and a probe for 0 would match an empty slot
			break
		}
		// The probe, from the home slot to the root or the first empty
		// slot, written out here (an inlined probe nearly doubles
		// throughput at large tables: the loop keeps more probes in
		// flight).
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
			if p := s.prog; p != nil { // ProgressTimeout: one store per ACK (read here: no register held for it)
				p[j] = s.progNow
			}
			acks++
			continue
		}
		if m.Kind != Init || m.TimeoutMs != 0 && m.TimeoutMs != s.defMs || m.Val == 0 || m.Task > MaxTask ||
			s.t.count >= s.maxPending || !fastInit {
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
			s.shiftUp(p, j)
		}
		es[p] = entry{key: root, val: m.Val, meta: uint64(flagInit|m.Task)<<32 | d<<(32+distShift) | uint64(uint32(s.defDeadline))}
		if pr := s.prog; pr != nil {
			pr[p] = s.progNow
		}
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
	s.loadAt(&c, m.Root, slot, s.t.e[slot].key != 0)
	out = s.step(&c, m, out)
	s.store(&c)
	return out
}

// StopAll empties the shard: every pending root with an INIT is reported
// Failed{stopped} (appended to out, which grows as needed), the others are
// counted as orphans. The shard stays usable.
func (s *Shard) StopAll(out []Outcome) []Outcome {
	s.setNow()
	for slot := range s.t.e {
		for s.t.e[slot].key != 0 { // a remove may shift another entry into slot
			e := &s.t.e[slot]
			if w := e.word(); w&flagInit != 0 {
				start, _ := s.startTimeout(slot, e, s.deadlineOf(e))
				s.stats.FailedStopped++
				out = append(out, Outcome{Root: e.key, Task: w & taskMask, Kind: Failed, Reason: ReasonStopped, Latency: s.latency(start)})
			} else {
				s.stats.Orphans++
				s.orphanGone(w)
			}
			s.dropEntry(slot)
		}
	}
	if invariants.Enabled {
		s.check()
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
