// Package model is the plain reference acker the fast ones are tested
// against. It keeps, per pending root, the actual set of outstanding edge
// ids (a map, toggled by every id a message carries: symmetric difference,
// the exact form of XOR with no false zeros), and implements the contract
// of docs/semantics.md
// rule by rule with no cleverness: no hashing tricks, no timer wheel (a
// deadline per root, scanned on Expire), no batching.
//
// Time: a root's deadline is restart+timeout, where restart is the time of
// the message that (re)started its timeout (creation, INIT, RESET). It
// expires at the first Expire whose tick reaches that deadline rounded up to
// a whole tick: never early, and within one tick when Expire runs every tick.
//
// The package is internal: only the repository's tests use
// it (see package acktest).
package model

import (
	"sort"
	"time"

	"github.com/xorack/xorack/ackcore"
)

type root struct {
	ids      map[uint64]bool
	init     bool
	task     uint32
	failed   bool
	drain    bool          // without INIT: what a failed tree still owes (rule 3)
	timeout  time.Duration // this root's timeout
	deadline time.Duration // restart + timeout
	initAt   time.Duration
	madeAt   time.Duration
	progress time.Duration // the last INIT or ACK
	owner    int           // without INIT: the owner whose message made it
}

// Model is the reference acker. Not safe for concurrent use.
type Model struct {
	maxPending  int
	failReserve int // entries FAILs may make beyond maxPending; 0: FAILs are refused at the bound
	timeout     time.Duration
	tick        time.Duration
	roots       map[uint64]*root
	held        map[uint64]int64 // FAILs held over the reserve: root -> generation
	stats       ackcore.Stats

	// Orphans giving way (SetEviction): every entry made without INIT,
	// in the order made; an element is live while its root still maps to
	// that entry and the entry has no INIT.
	evict      bool
	failBudget int           // FAILs held per generation
	heldN      map[int64]int // FAILs held, by generation
	orphanQ    []orphan

	// Progress timeouts (SetProgress): progressCap > 0.
	progressCap time.Duration

	// Orphans per owner (SetOwner, SetOrphanShare): the owner of the
	// messages applied now, and the most entries without INIT made by
	// one owner's messages (0: no bound but the table's).
	owner       int
	orphanShare int
}

// SetOwner says that the messages applied next come from owner (the
// shard's SetOwner).
func (m *Model) SetOwner(owner int) { m.owner = owner }

// SetOrphanShare gives the model the shard's per-owner bound: an ACK,
// FAIL or RESET for a root with no entry whose owner has n entries
// without INIT made by its messages is refused, Refused{full}, counted in
// OrphansRefused. n <= 0: no such bound.
func (m *Model) SetOrphanShare(n int) { m.orphanShare = max(n, 0) }

// ownerOrphans is the number of entries without INIT owner's messages made.
func (m *Model) ownerOrphans(owner int) int {
	n := 0
	for _, r := range m.roots {
		if !r.init && r.owner == owner {
			n++
		}
	}
	return n
}

type orphan struct {
	id uint64
	r  *root
}

// SetEviction gives the model the shard's rule 10 at the bound: an INIT,
// ACK or RESET that needs a new entry at the bound evicts entries without
// INIT while they can make room, each time the oldest (in the order they
// were made) of the owner with the most of them (the lowest such owner on
// a tie), an evicted entry's FAIL is held like a FAIL over the reserve, and
// each generation holds at most budget FAILs (the rest are dropped:
// Stats.FailsDropped). Without it (the default) nothing is evicted, as in
// the baseline ackers, and the hold has no budget.
func (m *Model) SetEviction(budget int) { m.evict, m.failBudget = true, budget }

// SetProgress gives the model the shard's Config.ProgressTimeout: a
// root's deadline is the later of its own and its last progress (INIT or
// ACK) plus its timeout, the latter at most cap after its INIT; at tick
// resolution, each time rounded up to a tick.
func (m *Model) SetProgress(cap time.Duration) { m.progressCap = cap }

// orphans is the number of entries without INIT.
func (m *Model) orphans() int {
	n := 0
	for _, r := range m.roots {
		if !r.init {
			n++
		}
	}
	return n
}

// makeRoom evicts the oldest orphans until the table is under its bound,
// if there are enough of them; it reports whether there is room.
func (m *Model) makeRoom(now time.Duration) bool {
	if !m.evict || len(m.roots)-m.orphans() >= m.maxPending {
		return false
	}
	for len(m.roots) >= m.maxPending {
		i := m.victim()
		if i < 0 {
			break
		}
		o := m.orphanQ[i]
		m.orphanQ = append(m.orphanQ[:i], m.orphanQ[i+1:]...)
		delete(m.roots, o.id)
		m.stats.OrphansEvicted++
		if o.r.failed {
			m.hold(now, o.id)
		}
	}
	return len(m.roots) < m.maxPending
}

// victim is the index in orphanQ of the orphan that gives way (rule 10):
// the oldest of the owner with the most entries without INIT, the lowest
// such owner on a tie; -1 if there is no orphan.
func (m *Model) victim() int {
	count := map[int]int{}
	for _, r := range m.roots {
		if !r.init {
			count[r.owner]++
		}
	}
	owner := -1
	for o, n := range count {
		if owner < 0 || n > count[owner] || n == count[owner] && o < owner {
			owner = o
		}
	}
	for i, o := range m.orphanQ {
		if r := m.roots[o.id]; r == o.r && !r.init && r.owner == owner {
			return i
		}
	}
	return -1
}

// hold keeps a FAIL for root, which has no entry, for this generation and
// the next, within the budget.
func (m *Model) hold(now time.Duration, root uint64) {
	g := m.gen(now)
	if m.evict && m.heldN[g] >= m.failBudget {
		m.stats.FailsDropped++
		return
	}
	if m.held == nil {
		m.held, m.heldN = map[uint64]int64{}, map[int64]int{}
	}
	m.held[root] = g
	m.heldN[g]++
	m.stats.FailsFiltered++
}

// SetFailReserve gives the model the shard's rule 3 at the bound: FAILs for
// roots without an entry may make n entries beyond the bound, and past
// those are held (exactly, here; the shard's filter may also fail a root
// no FAIL named) for between one and two default timeouts: the generation
// they were held in, now/timeout in ticks, and the next. With n == 0 (the
// default) a FAIL needing an entry at the bound is refused, as the
// baseline ackers do.
func (m *Model) SetFailReserve(n int) { m.failReserve = n }

// gen is the generation of the hold-over filter at time now.
func (m *Model) gen(now time.Duration) int64 {
	return int64(now/m.tick) / max(int64(m.timeout/m.tick), 1)
}

// heldFail reports whether a FAIL for root is held at time now.
func (m *Model) heldFail(now time.Duration, root uint64) bool {
	g, ok := m.held[root]
	return ok && m.gen(now) <= g+1
}

// New returns a model with the shard's configuration.
func New(maxPending int, timeout, tick time.Duration) *Model {
	return &Model{maxPending: maxPending, timeout: timeout, tick: tick, roots: make(map[uint64]*root)}
}

// Stats returns the counters the shard must match exactly.
func (m *Model) Stats() ackcore.Stats {
	s := m.stats
	s.Pending = len(m.roots)
	return s
}

// Pending reports whether r has an entry.
func (m *Model) Pending(r uint64) bool { _, ok := m.roots[r]; return ok }

// Apply applies one message at time now. ids are the edge ids the message
// toggles (INIT, ACK, and a FAIL that carries the failed tuple's ack val);
// their XOR is msg.Val.
func (m *Model) Apply(now time.Duration, msg ackcore.Msg, ids []uint64) (ackcore.Outcome, bool) {
	if !msg.Valid() {
		m.stats.RefusedInvalid++
		return msg.InvalidOutcome(), true
	}
	r := m.roots[msg.Root]
	msgTimeout := time.Duration(msg.TimeoutMs) * time.Millisecond
	full := len(m.roots) >= m.maxPending
	refuse := func() (ackcore.Outcome, bool) {
		m.stats.RefusedFull++
		return ackcore.Outcome{Root: msg.Root, Task: ackcore.NoTask, Kind: ackcore.Refused, Reason: ackcore.ReasonFull}, true
	}
	newRoot := func(timeout time.Duration) *root {
		nr := &root{ids: map[uint64]bool{}, timeout: timeout, deadline: now + timeout, madeAt: now, owner: m.owner}
		m.roots[msg.Root] = nr
		if msg.Kind != ackcore.Init && m.evict {
			m.orphanQ = append(m.orphanQ, orphan{msg.Root, nr})
		}
		return nr
	}
	if r == nil && msg.Kind != ackcore.Init && m.orphanShare > 0 && m.ownerOrphans(m.owner) >= m.orphanShare {
		switch msg.Kind { // counted under its kind, and as refused at its owner's share
		case ackcore.Ack:
			m.stats.Acks++
		case ackcore.Fail:
			m.stats.Fails++
		default:
			m.stats.Resets++
		}
		m.stats.OrphansRefused++
		return ackcore.Outcome{Root: msg.Root, Task: ackcore.NoTask, Kind: ackcore.Refused, Reason: ackcore.ReasonFull}, true
	}
	switch msg.Kind {
	case ackcore.Init:
		m.stats.Inits++
		held := m.heldFail(now, msg.Root)
		if r == nil {
			if held {
				m.stats.FailedExplicit++
				return ackcore.Outcome{Root: msg.Root, Task: msg.Task, Kind: ackcore.Failed, Reason: ackcore.ReasonExplicit}, true
			}
			if len(ids) == 0 {
				m.stats.Completed++
				return ackcore.Outcome{Root: msg.Root, Task: msg.Task, Kind: ackcore.Completed}, true
			}
			if full && !m.makeRoom(now) {
				m.stats.FailedFull++
				return ackcore.Outcome{Root: msg.Root, Task: msg.Task, Kind: ackcore.Failed, Reason: ackcore.ReasonFull}, true
			}
			to := m.timeout
			if msgTimeout != 0 {
				to = msgTimeout
			}
			r = newRoot(to)
		} else {
			if msgTimeout != 0 {
				r.timeout = msgTimeout
			}
			if !r.init && held {
				r.failed = true
			}
		}
		toggle(r.ids, ids)
		r.init, r.drain, r.task, r.initAt, r.progress = true, false, msg.Task, now, now
		r.deadline = now + r.timeout
		if r.failed {
			delete(m.roots, msg.Root)
			m.stats.FailedExplicit++
			return ackcore.Outcome{Root: msg.Root, Task: msg.Task, Kind: ackcore.Failed, Reason: ackcore.ReasonExplicit}, true
		}
		if len(r.ids) == 0 {
			delete(m.roots, msg.Root)
			m.stats.Completed++
			return ackcore.Outcome{Root: msg.Root, Task: msg.Task, Kind: ackcore.Completed}, true
		}
	case ackcore.Ack:
		m.stats.Acks++
		if r == nil {
			if full && !m.makeRoom(now) {
				return refuse()
			}
			r = newRoot(m.timeout)
		}
		toggle(r.ids, ids)
		r.progress = now
		if r.drain && len(r.ids) == 0 {
			delete(m.roots, msg.Root)
			m.stats.OrphansDrained++
			return ackcore.Outcome{}, false
		}
		if r.init && len(r.ids) == 0 {
			delete(m.roots, msg.Root)
			m.stats.Completed++
			return ackcore.Outcome{Root: msg.Root, Task: r.task, Kind: ackcore.Completed, Latency: now - r.initAt}, true
		}
	case ackcore.Fail:
		m.stats.Fails++
		if r == nil {
			switch {
			case full && m.failReserve == 0:
				return refuse()
			case len(m.roots) >= m.maxPending+m.failReserve:
				m.hold(now, msg.Root)
				return ackcore.Outcome{}, false
			case full:
				m.stats.FailsReserved++
			}
			r = newRoot(m.timeout)
		}
		if r.drain { // another FAIL of a failed tree: its ids drain too
			if toggle(r.ids, ids); len(r.ids) == 0 {
				delete(m.roots, msg.Root)
				m.stats.OrphansDrained++
			}
			return ackcore.Outcome{}, false
		}
		if !r.init {
			r.failed = true
			return ackcore.Outcome{}, false
		}
		m.stats.FailedExplicit++
		o := ackcore.Outcome{Root: msg.Root, Task: r.task, Kind: ackcore.Failed, Reason: ackcore.ReasonExplicit, Latency: now - r.initAt}
		// A FAIL carrying the failed tuple's ids leaves what the tree still
		// owes as a drain: an entry without INIT, made now, which the
		// tree's last ACK removes.
		toggle(r.ids, ids)
		if len(ids) == 0 || len(r.ids) == 0 || m.orphanShare > 0 && m.ownerOrphans(m.owner) >= m.orphanShare {
			delete(m.roots, msg.Root)
			return o, true
		}
		// A new entry: the orphan queue's older places for this root (an
		// early ACK made it) are stale, as the shard's tags make them.
		d := &root{ids: r.ids, drain: true, timeout: m.timeout, deadline: now + m.timeout, madeAt: now, owner: m.owner}
		m.roots[msg.Root] = d
		if m.evict {
			m.orphanQ = append(m.orphanQ, orphan{msg.Root, d})
		}
		return o, true
	case ackcore.Reset:
		m.stats.Resets++
		if r == nil {
			if full && !m.makeRoom(now) {
				return refuse()
			}
			to := m.timeout
			if msgTimeout != 0 {
				to = msgTimeout
			}
			r = newRoot(to)
		}
		if msgTimeout != 0 {
			r.timeout = msgTimeout
		}
		r.deadline = now + r.timeout
	}
	return ackcore.Outcome{}, false
}

func toggle(set map[uint64]bool, ids []uint64) {
	for _, id := range ids {
		if set[id] {
			delete(set, id)
		} else {
			set[id] = true
		}
	}
}

// Due is the tick rule: the first tick at or after the deadline.
func (m *Model) dueTick(d time.Duration) int64 {
	return int64((d + m.tick - 1) / m.tick)
}

// Expire removes every root whose deadline tick has been reached at now and
// returns the Failed{timeout} outcomes, sorted by root; roots without INIT
// expire silently as orphans.
func (m *Model) Expire(now time.Duration) []ackcore.Outcome {
	nowTick := int64(now / m.tick)
	var out []ackcore.Outcome
	for id, r := range m.roots {
		if m.due(r) > nowTick {
			continue
		}
		delete(m.roots, id)
		if r.init {
			m.stats.FailedTimeout++
			out = append(out, ackcore.Outcome{Root: id, Task: r.task, Kind: ackcore.Failed, Reason: ackcore.ReasonTimeout, Latency: now - r.initAt})
		} else {
			m.stats.Orphans++
		}
	}
	Sort(out)
	return out
}

// due is the tick r expires at: its deadline's, or with progress timeouts
// and an INIT, its last progress's plus its timeout, capped, if later.
func (m *Model) due(r *root) int64 {
	d := m.dueTick(r.deadline)
	if m.progressCap > 0 && r.init {
		p := m.dueTick(r.progress) + m.dueTick(r.timeout)
		c := m.dueTick(r.initAt) + m.dueTick(m.progressCap)
		d = max(d, min(p, c))
	}
	return d
}

// NextDeadline is the earliest time at which Expire would remove something.
func (m *Model) NextDeadline() (time.Duration, bool) {
	var best time.Duration
	ok := false
	for _, r := range m.roots {
		d := time.Duration(m.due(r)) * m.tick
		if !ok || d < best {
			best, ok = d, true
		}
	}
	return best, ok
}

// Sort orders outcomes by root, then kind, for comparing sets of outcomes.
func Sort(o []ackcore.Outcome) {
	sort.Slice(o, func(i, j int) bool {
		if o[i].Root != o[j].Root {
			return o[i].Root < o[j].Root
		}
		return o[i].Kind < o[j].Kind
	})
}
