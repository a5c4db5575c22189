package ackcore

// The contract's rules (docs/semantics.md), on the slow path: what each
// message does to its root's entry, loaded into a cur and stored back.

import (
	"time"

	"github.com/xorack/xorack/internal/invariants"
)

// cur is one root's entry while a message is applied to it: loaded from
// the table, stepped (step), stored back (store).
type cur struct {
	root    uint64
	slot    int  // the entry's slot when inTable, else the empty slot its probe ended at
	inTable bool // the table held the entry before the message
	live    bool // the entry exists now
	resched bool // deadline, start or timeout changed: rewrite them on store
	timed   bool // deadline, start and timeout hold the entry's timing
	made    bool // the entry was (re)made by this message (create, or a drain)
	// progressed: an INIT or ACK reached the entry (its last progress,
	// for ProgressTimeout, is now).
	progressed bool
	val        uint64
	word       metaWord // flagInit | task, or an orphan's bits; the other bits are the table's

	deadline uint64 // tick
	start    uint64 // tick: the INIT's, or the entry's creation without INIT
	timeout  int64  // ns
}

// loadAt loads c for root, whose probe ended at slot.
func (s *Shard) loadAt(c *cur, root uint64, slot int, found bool) {
	*c = cur{root: root, slot: slot, inTable: found, live: found}
	if found {
		e := &s.t.e[slot]
		c.val, c.word = e.val, e.word().meaning()
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

// create makes c a new entry (rule 7 when the message is not an INIT),
// unless bound entries exist already; store inserts it. The caller sets
// its val, word and timing.
func (s *Shard) create(c *cur, bound int) bool {
	if !c.inTable && s.t.count >= bound {
		return false
	}
	c.live, c.made = true, true
	return true
}

// kill removes c's entry (on store).
func (s *Shard) kill(c *cur) {
	c.live = false
	c.resched = false
}

// orphanRoom makes c, for an ACK or RESET of a root with no entry, a new
// entry without INIT (rule 7), when its owner is within its orphan share
// and the table has room, an orphan giving way at the bound if need be
// (rule 10). When it reports false, refuseNew answers the message.
func (s *Shard) orphanRoom(c *cur) bool {
	return !s.ownerFull() && (s.create(c, s.maxPending) || s.makeRoom(c))
}

// refuseNew answers m, an ACK or RESET for which orphanRoom found no
// room: Refused{full}, counted at its owner's share or at the bound.
func (s *Shard) refuseNew(m *Msg, out []Outcome) []Outcome {
	if s.ownerFull() {
		return s.refuseOrphan(m, out)
	}
	s.stats.RefusedFull++
	return append(out, Outcome{Root: m.Root, Task: NoTask, Kind: Refused, Reason: ReasonFull})
}

// msgTimeout is the timeout m asks for in ns, 0 for none.
func msgTimeout(m *Msg) int64 { return int64(m.TimeoutMs) * int64(time.Millisecond) }

// step applies one message to c, appending any outcome to out. It is the
// whole of the contract's rules for one message (docs/semantics.md); the
// fast paths (fastPath in apply.go, ackRun) repeat its
// common ACK, completion and INIT cases inline, and the differential tests
// hold them to it (see doc.go, "Where the rules live").
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
			c.val, c.word = m.Val, initWord(m.Task)
			s.begin(c, s.nowStart(), to)
			return out
		}
		// The entry exists: made by earlier ACK/FAIL/RESET, or a repeated INIT.
		s.loadTiming(c)
		if to == 0 {
			to = c.timeout // the default, or a timeout a RESET set before the INIT
		}
		failed := !c.word.inited() && (c.word.failedEarly() || s.fails.active() && s.fails.has(mix(m.Root, &s.t.keys)))
		c.val ^= m.Val
		c.word = initWord(m.Task)
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
			if !s.orphanRoom(c) {
				return s.refuseNew(m, out)
			}
			c.val, c.word = m.Val, 0
			s.begin(c, s.nowStart(), s.defNs)
			return out
		}
		c.val ^= m.Val
		c.progressed = true
		if c.val == 0 && c.word.isDrain() { // a drain's last ACK
			s.kill(c)
			s.stats.OrphansDrained++
			return out
		}
		if c.val == 0 && c.word.inited() {
			s.loadTiming(c)
			lat := s.latency(c.start)
			task := c.word.spoutTask()
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
			c.val, c.word = 0, metaWord(flagFailed) // remembered until the INIT (rule 3) or expiry (rule 6)
			s.begin(c, s.nowStart(), s.defNs)
			return out
		}
		if c.word.isDrain() { // another FAIL of a failed tree: its val drains too
			if c.val ^= m.Val; c.val == 0 {
				s.kill(c)
				s.stats.OrphansDrained++
			}
			return out
		}
		if !c.word.inited() {
			c.word |= metaWord(flagFailed)
			return out
		}
		s.loadTiming(c)
		lat := s.latency(c.start)
		task := c.word.spoutTask()
		s.stats.FailedExplicit++
		// A FAIL that carries the failed tuple's ack val leaves what the
		// tree still owes as a drain: an orphan that the tree's last ACK
		// removes (rule 3 of docs/semantics.md). Without a val, with
		// nothing owed, or with its owner at its orphan share, the entry
		// goes.
		// The drain is a new entry, as if the tree's entry had ended and
		// an orphan begun: made now (store counts it against the current
		// owner and queues it with a new tag).
		if c.val ^= m.Val; m.Val == 0 || c.val == 0 || s.ownerFull() {
			s.kill(c)
		} else {
			c.word = metaWord(flagTomb)
			c.made = true
			s.begin(c, s.nowStart(), s.defNs)
		}
		return append(out, Outcome{Root: m.Root, Task: task, Kind: Failed, Reason: ReasonExplicit, Latency: lat})

	default: // Reset
		s.stats.Resets++
		to := msgTimeout(m)
		if !c.live {
			if !s.orphanRoom(c) {
				return s.refuseNew(m, out)
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

// store ends a message: it writes c back, removes it, or inserts it, and
// keeps the orphan count and FIFO (orphans.go) right: an entry without
// INIT made by this message is a new orphan, queued with a new tag.
func (s *Shard) store(c *cur) {
	wasOrphan := c.inTable && !s.t.e[c.slot].word().inited()
	isOrphan := c.live && !c.word.inited()
	if wasOrphan && (!isOrphan || c.made) {
		s.orphanGone(s.t.e[c.slot].word()) // its INIT came, or it ended (and another began)
	}
	if isOrphan && (!wasOrphan || c.made) {
		s.orphans++
		s.ownerOrphans[s.owner]++
		c.word = c.word.orphanFlags() | metaWord(uint32(s.owner)<<s.ownerShift)
		c.word |= metaWord(s.queueOrphan(c.root))
	}
	switch {
	case c.inTable && c.live:
		e := &s.t.e[c.slot]
		if c.progressed && s.prog != nil {
			s.prog[c.slot] = uint32(s.nowStart())
		}
		e.val = c.val
		e.meta = uint64(c.word|e.word().tableBits())<<32 | e.meta&0xffffffff
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
