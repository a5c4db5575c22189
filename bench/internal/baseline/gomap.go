package baseline

import (
	"fmt"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/timerwheel"
)

// entry is GoMap's value per pending root: 16 bytes, the shard's per-slot
// payload plus the timer handle the shard gets for free from its slot index.
// Its start tick is derived from its deadline (deadline - default timeout)
// unless flagCustom sends it to the custom side map, as in the shard, so the
// comparison measures the hash map, not a fatter entry.
type entry struct {
	val  uint64 // ack val
	word uint32 // task (or orphan tag) | flags (flagInit, flagFailed, flagCustom, flagDrain)
	h    uint32 // timer handle: index into roots and into the wheel
}

// custom holds what an entry cannot derive from its deadline: a start moved
// away from deadline-timeout by RESET, or a per-root timeout.
type custom struct {
	start   uint64 // the INIT's start tick (ticks.startTick)
	timeout int64  // the root's timeout, ns
}

// GoMap is the acker a good Go programmer writes with the built-in map:
// map[uint64]entry keyed by root, timeouts on the project's timer wheel
// with handles from a free list, the clock read once per Apply or Expire.
// Its semantics are exactly the shard's and the model's (the differential
// test checks it message by message). It keeps drains as rule 3 of
// docs/semantics.md says: a FAIL carrying a val leaves what its failed tree
// still owes as an orphan (flagDrain) that the tree's last ACK removes
// (Stats.OrphansDrained); GoMap has no owners, so no orphan share stops
// one. Not safe for concurrent use: see MutexMap.
type GoMap struct {
	m      map[uint64]entry  // pending roots
	custom map[uint64]custom // roots with flagCustom; rare (RESET, per-root timeouts)
	w      *timerwheel.Wheel // one timer per entry, handle entry.h
	roots  []uint64          // handle -> root of the entry holding it, 0 when free
	free   []uint32          // free handles, a stack; len(free)+len(m) == MaxPending
	ticks

	maxPending int
	orphans    int        // entries without INIT, drains included
	oq         orphanFIFO // their roots, oldest first (gomap_orphans.go)
	// Per-call time, set at the top of Apply and Expire.
	nowNs   int64
	nowTick uint64

	stats ackcore.Stats
}

var _ ackcore.Interface = (*GoMap)(nil)

// NewGoMap makes a GoMap. The map, the handle pool and the wheel are sized
// for cfg.MaxPending up front, as the shard's table is, so that a warmed-up
// GoMap allocates nothing per message.
func NewGoMap(cfg Config) (*GoMap, error) {
	g := new(GoMap)
	if err := g.init(cfg); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *GoMap) init(cfg Config) error {
	cfg, err := cfg.validate()
	if err != nil {
		return err
	}
	n := cfg.MaxPending
	*g = GoMap{
		m:          make(map[uint64]entry, n),
		custom:     make(map[uint64]custom),
		roots:      make([]uint64, n),
		free:       make([]uint32, n),
		ticks:      newTicks(cfg),
		maxPending: n,
	}
	for i := range g.free {
		g.free[i] = uint32(n - 1 - i) // pop hands out 0, 1, 2, ...
	}
	g.setNow()
	g.w = timerwheel.New(n, g.nowTick)
	return nil
}

func (g *GoMap) setNow() { g.nowNs, g.nowTick = g.now(g.nowNs) }

// Stats returns exact counters.
func (g *GoMap) Stats() ackcore.Stats {
	st := g.stats
	st.Pending = len(g.m)
	return st
}

// Apply applies msgs in order and appends their outcomes to out.
func (g *GoMap) Apply(msgs []ackcore.Msg, out []ackcore.Outcome) []ackcore.Outcome {
	g.setNow()
	return applyEach(msgs, out, &g.stats, g.apply)
}

// apply is docs/semantics.md's rules for one valid message, in the order
// of the shard's step, on a map entry read once and written back when it
// changed.
func (g *GoMap) apply(m *ackcore.Msg, out []ackcore.Outcome) []ackcore.Outcome {
	root := m.Root
	e, ok := g.m[root]
	switch m.Kind {
	case ackcore.Ack:
		g.stats.Acks++
		if !ok {
			if len(g.m) >= g.maxPending && !g.makeRoom() {
				g.stats.RefusedFull++
				return append(out, refuseFull(root))
			}
			g.insertOrphan(root, entry{val: m.Val}, g.defNs)
			return out
		}
		e.val ^= m.Val
		if e.val != 0 || e.word&(flagInit|flagDrain) == 0 {
			g.m[root] = e // Go maps have no in-place update of a struct value
			return out
		}
		if e.word&flagInit == 0 { // a drain's last ACK
			g.endDrain(root, e)
			return out
		}
		d, _ := g.w.Deadline(e.h)
		lat := g.latency(g.nowNs, g.start(root, e, d))
		g.remove(root, e)
		g.stats.Completed++
		return append(out, ackcore.Outcome{Root: root, Task: e.word & taskMask, Kind: ackcore.Completed, Latency: lat})

	case ackcore.Init:
		g.stats.Inits++
		to := msgTimeout(m, g.defNs)
		if !ok {
			if m.Val == 0 { // rule 4: a tuple with no recipients
				g.stats.Completed++
				return append(out, ackcore.Outcome{Root: root, Task: m.Task, Kind: ackcore.Completed})
			}
			if len(g.m) >= g.maxPending && !g.makeRoom() {
				g.stats.FailedFull++
				return append(out, ackcore.Outcome{Root: root, Task: m.Task, Kind: ackcore.Failed, Reason: ackcore.ReasonFull})
			}
			e = entry{val: m.Val, word: flagInit | m.Task}
			if m.TimeoutMs != 0 {
				e.word |= flagCustom
				g.custom[root] = custom{start: g.startTick(g.nowNs), timeout: to}
			}
			g.insert(root, e, to)
			return out
		}
		// The entry exists: made by an earlier ACK/FAIL/RESET, or a repeated INIT.
		if e.word&flagInit == 0 {
			g.orphans--
		}
		if m.TimeoutMs == 0 && e.word&flagCustom != 0 {
			to = g.custom[root].timeout // a timeout a RESET set before the INIT
		}
		e.val ^= m.Val
		e.word = e.word&^(taskMask|flagDrain) | flagInit | m.Task
		if to != g.defNs || e.word&flagCustom != 0 {
			e.word |= flagCustom
			g.custom[root] = custom{start: g.startTick(g.nowNs), timeout: to}
		}
		switch {
		case e.word&flagFailed != 0: // rule 3: the FAIL that came first wins
			g.remove(root, e)
			g.stats.FailedExplicit++
			return append(out, ackcore.Outcome{Root: root, Task: m.Task, Kind: ackcore.Failed, Reason: ackcore.ReasonExplicit})
		case e.val == 0:
			g.remove(root, e)
			g.stats.Completed++
			return append(out, ackcore.Outcome{Root: root, Task: m.Task, Kind: ackcore.Completed})
		}
		g.m[root] = e
		g.arm(e.h, g.deadlineAfter(g.nowNs, to), true)
		return out

	case ackcore.Fail:
		g.stats.Fails++
		if !ok {
			if len(g.m) >= g.maxPending {
				g.stats.RefusedFull++
				return append(out, refuseFull(root))
			}
			g.insertOrphan(root, entry{word: flagFailed}, g.defNs)
			return out
		}
		if e.word&flagDrain != 0 { // another FAIL of a failed tree: its val drains too
			if e.val ^= m.Val; e.val == 0 {
				g.endDrain(root, e)
			} else {
				g.m[root] = e
			}
			return out
		}
		if e.word&flagInit == 0 {
			e.word |= flagFailed // remembered until the INIT (rule 3) or expiry (rule 6)
			g.m[root] = e
			return out
		}
		d, _ := g.w.Deadline(e.h)
		lat := g.latency(g.nowNs, g.start(root, e, d))
		task := e.word & taskMask
		g.stats.FailedExplicit++
		// A FAIL that carries the failed tuple's ack val leaves what the
		// tree still owes as a drain (rule 3); without a val, or with
		// nothing owed, the entry goes.
		if e.val ^= m.Val; m.Val == 0 || e.val == 0 {
			g.remove(root, e)
		} else {
			g.makeDrain(root, e)
		}
		return append(out, ackcore.Outcome{Root: root, Task: task, Kind: ackcore.Failed, Reason: ackcore.ReasonExplicit, Latency: lat})

	default: // Reset
		g.stats.Resets++
		to := int64(m.TimeoutMs) * int64(time.Millisecond)
		if !ok {
			if to == 0 {
				to = g.defNs
			}
			if len(g.m) >= g.maxPending && !g.makeRoom() {
				g.stats.RefusedFull++
				return append(out, refuseFull(root))
			}
			e = entry{}
			if to != g.defNs {
				e.word = flagCustom
				g.custom[root] = custom{timeout: to}
			}
			g.insertOrphan(root, e, to)
			return out
		}
		if e.word&flagCustom != 0 {
			cu := g.custom[root]
			if to != 0 {
				cu.timeout = to
				g.custom[root] = cu
			}
			to = cu.timeout
		} else {
			if to == 0 {
				to = g.defNs
			}
			if to != g.defNs || e.word&flagInit != 0 {
				// The deadline moves away from start+default: keep start aside.
				d, _ := g.w.Deadline(e.h)
				e.word |= flagCustom
				g.custom[root] = custom{start: d - g.defTicks, timeout: to}
				g.m[root] = e
			}
		}
		g.arm(e.h, g.deadlineAfter(g.nowNs, to), true)
		return out
	}
}

// start is the tick of the INIT of root's entry e, whose deadline is d.
func (g *GoMap) start(root uint64, e entry, d uint64) uint64 {
	if e.word&flagCustom != 0 {
		return g.custom[root].start
	}
	return d - g.defTicks
}

// insert adds root's entry e, taking a handle from the free list and
// arming its timer for timeoutNs from now. The caller checked the bound, so
// a handle is free.
func (g *GoMap) insert(root uint64, e entry, timeoutNs int64) {
	h := g.free[len(g.free)-1]
	g.free = g.free[:len(g.free)-1]
	g.roots[h] = root
	e.h = h
	g.m[root] = e
	g.arm(h, g.deadlineAfter(g.nowNs, timeoutNs), false)
}

// remove deletes root's entry e and returns its handle to the free list.
func (g *GoMap) remove(root uint64, e entry) {
	g.w.Cancel(e.h)
	g.release(root, e)
}

// release forgets root's entry e, whose timer is already stopped.
func (g *GoMap) release(root uint64, e entry) {
	if e.word&flagCustom != 0 {
		delete(g.custom, root)
	}
	delete(g.m, root)
	g.roots[e.h] = 0
	g.free = append(g.free, e.h)
}

// arm sets h's timer, clamping a deadline beyond the wheel's reach (Expire
// has not run for days) to the farthest tick it takes, as the shard does.
func (g *GoMap) arm(h uint32, deadline uint64, re bool) {
	if far := g.w.Now() + timerwheel.MaxDelay; deadline > far {
		deadline = far
	}
	if re {
		g.w.Reschedule(h, deadline)
	} else {
		g.w.Schedule(h, deadline)
	}
}

// Expire appends the outcomes of roots whose deadline has passed, at most
// cap(out)-len(out) of them; more is true when it stopped for lack of room.
// Roots that never saw INIT are dropped silently and counted as orphans.
func (g *GoMap) Expire(out []ackcore.Outcome) (_ []ackcore.Outcome, more bool) {
	g.setNow()
	for len(out) < cap(out) {
		h, d, ok := g.w.ExpireDeadline(g.nowTick)
		if !ok {
			return out, false
		}
		root := g.roots[h]
		e := g.m[root]
		if e.word&flagInit != 0 {
			lat := g.latency(g.nowNs, g.start(root, e, d))
			g.stats.FailedTimeout++
			out = append(out, ackcore.Outcome{Root: root, Task: e.word & taskMask, Kind: ackcore.Failed, Reason: ackcore.ReasonTimeout, Latency: lat})
		} else {
			g.stats.Orphans++
			g.orphans--
		}
		g.release(root, e)
	}
	return out, true
}

// Verify checks GoMap's invariants: every entry holds a distinct handle
// that maps back to its root and has a timer, the free list holds exactly
// the other handles, the custom map holds exactly the flagged roots, flags
// are consistent, and the bound holds. It costs O(MaxPending).
func (g *GoMap) Verify() error {
	if len(g.m) > g.maxPending {
		return fmt.Errorf("baseline: GoMap: %d entries exceed MaxPending %d", len(g.m), g.maxPending)
	}
	if len(g.m)+len(g.free) != g.maxPending {
		return fmt.Errorf("baseline: GoMap: %d entries and %d free handles, want %d in all", len(g.m), len(g.free), g.maxPending)
	}
	if g.w.Len() != len(g.m) {
		return fmt.Errorf("baseline: GoMap: %d timers for %d entries", g.w.Len(), len(g.m))
	}
	customs, orphans := 0, 0
	for root, e := range g.m {
		if e.word&flagInit == 0 {
			orphans++
		}
		if g.roots[e.h] != root {
			return fmt.Errorf("baseline: GoMap: root %#x holds handle %d, which maps to %#x", root, e.h, g.roots[e.h])
		}
		if !g.w.Scheduled(e.h) {
			return fmt.Errorf("baseline: GoMap: root %#x has no timer", root)
		}
		if e.word&flagFailed != 0 && e.word&flagInit != 0 {
			return fmt.Errorf("baseline: GoMap: root %#x both failed-before-INIT and INIT", root)
		}
		if e.word&flagDrain != 0 && e.word&(flagInit|flagFailed) != 0 {
			return fmt.Errorf("baseline: GoMap: root %#x a drain with INIT or failed-before-INIT", root)
		}
		if e.word&flagDrain != 0 && e.val == 0 {
			return fmt.Errorf("baseline: GoMap: root %#x a drain with nothing owed", root)
		}
		if e.word&flagCustom != 0 {
			customs++
			if _, ok := g.custom[root]; !ok {
				return fmt.Errorf("baseline: GoMap: root %#x flagged custom, not in the custom map", root)
			}
		}
	}
	if orphans != g.orphans || len(g.oq.q)-g.oq.head < orphans {
		return fmt.Errorf("baseline: GoMap: %d entries without INIT, count %d, %d queued", orphans, g.orphans, len(g.oq.q)-g.oq.head)
	}
	if customs != len(g.custom) {
		return fmt.Errorf("baseline: GoMap: %d custom entries flagged, %d in the map", customs, len(g.custom))
	}
	for _, h := range g.free {
		if g.roots[h] != 0 || g.w.Scheduled(h) {
			return fmt.Errorf("baseline: GoMap: free handle %d in use", h)
		}
	}
	return nil
}
