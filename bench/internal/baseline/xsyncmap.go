package baseline

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/timerwheel"
)

// xentry is XsyncMap's value per pending root. It keeps its start tick and
// timeout itself instead of deriving them as GoMap does: xsync stores every
// entry behind its own pointer anyway (one allocation per insert and per
// update), so 16 more bytes cost little, and the per-root read-modify-write
// then needs the timer lock only to arm or stop a timer.
type xentry struct {
	val     uint64
	start   uint64 // the INIT's start tick (ticks.startTick)
	timeout int64  // the root's timeout, ns
	word    uint32 // task | flags (flagInit, flagFailed, flagDrain)
	h       uint32 // timer handle: index into roots and into the wheel
}

// XsyncMap is the acker built on github.com/puzpuzpuz/xsync/v3's MapOf, a
// concurrent hash map: each message is one Compute, the map's per-root
// read-modify-write under the root's bucket lock. Timers are GoMap's wheel
// and handle pool behind one mutex, taken only to arm, re-arm or stop a
// timer (creation, INIT, RESET, a FAIL leaving a drain, removal, expiry),
// never for the ACK that merely XORs. Apply, Expire and Stats are safe for concurrent use; used
// from one goroutine its outcomes and counters are exactly the model's. It
// keeps drains as rule 3 of docs/semantics.md says: a FAIL carrying a val
// leaves what its failed tree still owes as an orphan (flagDrain, re-armed
// with the default timeout) that the tree's last ACK removes
// (Stats.OrphansDrained); it has no owners, so no orphan share stops one.
//
// Lock order: a bucket lock (inside Compute), then mu. Expire takes the
// next due timer under mu alone, lets go, and only then Computes on its
// root, checking there that the timer was not re-armed or the root ended
// in between.
type XsyncMap struct {
	m *xsync.MapOf[uint64, xentry]
	ticks
	maxPending int

	pending atomic.Int64 // entries in m; a new entry reserves its place first, so the bound is exact
	lastNs  atomic.Int64 // latest clock reading used: time never runs backwards

	mu    sync.Mutex
	w     *timerwheel.Wheel // guarded by mu
	roots []uint64          // guarded by mu: handle -> root, 0 when free
	free  []uint32          // guarded by mu: free handles, a stack

	// Counters, added once per Apply or Expire call from its local tally.
	inits, acks, fails, resets                           atomic.Uint64
	completed, failedExplicit, failedTimeout, failedFull atomic.Uint64
	orphans, refusedFull, refusedInvalid, orphansDrained atomic.Uint64
}

var _ ackcore.Interface = (*XsyncMap)(nil)

// NewXsyncMap makes an XsyncMap, presizing the map (grow-only) and the
// timers for cfg.MaxPending.
func NewXsyncMap(cfg Config) (*XsyncMap, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	n := cfg.MaxPending
	x := &XsyncMap{
		m:          xsync.NewMapOf[uint64, xentry](xsync.WithPresize(n), xsync.WithGrowOnly()),
		ticks:      newTicks(cfg),
		maxPending: n,
		roots:      make([]uint64, n),
		free:       make([]uint32, n),
	}
	for i := range x.free {
		x.free[i] = uint32(n - 1 - i)
	}
	_, tick := x.now()
	x.w = timerwheel.New(n, tick)
	return x, nil
}

// now reads the clock, never going below an earlier reading of any caller.
func (x *XsyncMap) now() (int64, uint64) {
	ns, _ := x.ticks.now(0)
	for {
		last := x.lastNs.Load()
		if ns <= last {
			ns = last
			break
		}
		if x.lastNs.CompareAndSwap(last, ns) {
			break
		}
	}
	return ns, uint64(ns / x.tickNs)
}

// Stats returns the counters. Under concurrent use they are not one
// snapshot: each is exact as of some moment during the call.
func (x *XsyncMap) Stats() ackcore.Stats {
	return ackcore.Stats{
		Inits: x.inits.Load(), Acks: x.acks.Load(), Fails: x.fails.Load(), Resets: x.resets.Load(),
		Completed: x.completed.Load(), FailedExplicit: x.failedExplicit.Load(),
		FailedTimeout: x.failedTimeout.Load(), FailedFull: x.failedFull.Load(),
		Orphans: x.orphans.Load(), RefusedFull: x.refusedFull.Load(), RefusedInvalid: x.refusedInvalid.Load(),
		OrphansDrained: x.orphansDrained.Load(),
		Pending:        int(x.pending.Load()),
	}
}

// add publishes a call's tally.
func (x *XsyncMap) add(s *ackcore.Stats) {
	for _, c := range [...]struct {
		n *uint64
		a *atomic.Uint64
	}{
		{&s.Inits, &x.inits}, {&s.Acks, &x.acks}, {&s.Fails, &x.fails}, {&s.Resets, &x.resets},
		{&s.Completed, &x.completed}, {&s.FailedExplicit, &x.failedExplicit},
		{&s.FailedTimeout, &x.failedTimeout}, {&s.FailedFull, &x.failedFull},
		{&s.Orphans, &x.orphans}, {&s.RefusedFull, &x.refusedFull}, {&s.RefusedInvalid, &x.refusedInvalid},
		{&s.OrphansDrained, &x.orphansDrained},
	} {
		if *c.n != 0 {
			c.a.Add(*c.n)
		}
	}
}

// xcall is one Apply call's state, shared with the Compute callback (made
// once per call, not per message).
type xcall struct {
	x     *XsyncMap
	m     *ackcore.Msg
	nowNs int64
	out   ackcore.Outcome // the current message's outcome, if has
	has   bool
	stats ackcore.Stats // this call's tally
}

// Apply applies msgs in order, appending their outcomes to out. Safe for
// concurrent use; messages of one root from different goroutines are
// applied in some order.
func (x *XsyncMap) Apply(msgs []ackcore.Msg, out []ackcore.Outcome) []ackcore.Outcome {
	c := &xcall{x: x}
	c.nowNs, _ = x.now()
	fn := c.step
	for i := range msgs {
		m := &msgs[i]
		if invalid(m) {
			c.stats.RefusedInvalid++
			out = append(out, refuseInvalid(m))
			continue
		}
		c.m, c.has = m, false
		x.m.Compute(m.Root, fn)
		if c.has {
			out = append(out, c.out)
		}
	}
	x.add(&c.stats)
	return out
}

func (c *xcall) emit(o ackcore.Outcome) { c.out, c.has = o, true }

// step is docs/semantics.md's rules for one message, run by Compute under the
// root's bucket lock. It returns the new entry and whether to delete it (a
// delete of an absent root stores nothing).
func (c *xcall) step(e xentry, loaded bool) (xentry, bool) {
	x, m := c.x, c.m
	const del, keep = true, false
	switch m.Kind {
	case ackcore.Ack:
		c.stats.Acks++
		if !loaded {
			return c.storeOrphan(e, xentry{val: m.Val, timeout: x.defNs})
		}
		e.val ^= m.Val
		if e.val != 0 || e.word&(flagInit|flagDrain) == 0 {
			return e, keep
		}
		x.release(e.h)
		if e.word&flagInit == 0 { // a drain's last ACK
			c.stats.OrphansDrained++
			return e, del
		}
		c.stats.Completed++
		c.emit(ackcore.Outcome{Root: m.Root, Task: e.word & taskMask, Kind: ackcore.Completed, Latency: x.latency(c.nowNs, e.start)})
		return e, del

	case ackcore.Init:
		c.stats.Inits++
		if !loaded {
			if m.Val == 0 { // rule 4
				c.stats.Completed++
				c.emit(ackcore.Outcome{Root: m.Root, Task: m.Task, Kind: ackcore.Completed})
				return e, del
			}
			if !x.reserve() {
				c.stats.FailedFull++
				c.emit(ackcore.Outcome{Root: m.Root, Task: m.Task, Kind: ackcore.Failed, Reason: ackcore.ReasonFull})
				return e, del
			}
			e = xentry{val: m.Val, start: x.startTick(c.nowNs), timeout: msgTimeout(m, x.defNs), word: flagInit | m.Task}
			return x.create(m.Root, e, c.nowNs), keep
		}
		e.val ^= m.Val
		e.word = e.word&^(taskMask|flagDrain) | flagInit | m.Task
		e.start = x.startTick(c.nowNs)
		e.timeout = msgTimeout(m, e.timeout)
		switch {
		case e.word&flagFailed != 0: // rule 3
			x.release(e.h)
			c.stats.FailedExplicit++
			c.emit(ackcore.Outcome{Root: m.Root, Task: m.Task, Kind: ackcore.Failed, Reason: ackcore.ReasonExplicit})
			return e, del
		case e.val == 0:
			x.release(e.h)
			c.stats.Completed++
			c.emit(ackcore.Outcome{Root: m.Root, Task: m.Task, Kind: ackcore.Completed})
			return e, del
		}
		x.rearm(e.h, x.deadlineAfter(c.nowNs, e.timeout))
		return e, keep

	case ackcore.Fail:
		c.stats.Fails++
		if !loaded {
			return c.storeOrphan(e, xentry{word: flagFailed, timeout: x.defNs})
		}
		if e.word&flagDrain != 0 { // another FAIL of a failed tree: its val drains too
			if e.val ^= m.Val; e.val != 0 {
				return e, keep
			}
			x.release(e.h)
			c.stats.OrphansDrained++
			return e, del
		}
		if e.word&flagInit == 0 {
			e.word |= flagFailed
			return e, keep
		}
		c.stats.FailedExplicit++
		c.emit(ackcore.Outcome{Root: m.Root, Task: e.word & taskMask, Kind: ackcore.Failed, Reason: ackcore.ReasonExplicit, Latency: x.latency(c.nowNs, e.start)})
		// A FAIL that carries the failed tuple's ack val leaves what the
		// tree still owes as a drain (rule 3): an entry without INIT or
		// task, as if made now. Without a val, or with nothing owed, the
		// entry goes.
		if e.val ^= m.Val; m.Val == 0 || e.val == 0 {
			x.release(e.h)
			return e, del
		}
		e = xentry{val: e.val, timeout: x.defNs, word: flagDrain, h: e.h}
		x.rearm(e.h, x.deadlineAfter(c.nowNs, e.timeout))
		return e, keep

	default: // Reset
		c.stats.Resets++
		if !loaded {
			return c.storeOrphan(e, xentry{timeout: msgTimeout(m, x.defNs)})
		}
		e.timeout = msgTimeout(m, e.timeout)
		x.rearm(e.h, x.deadlineAfter(c.nowNs, e.timeout))
		return e, keep
	}
}

// storeOrphan is step for an ACK, FAIL or RESET of an absent root: it stores
// entry n for it, or, at the bound, refuses the message and stores
// nothing.
func (c *xcall) storeOrphan(e, n xentry) (xentry, bool) {
	if !c.x.reserve() {
		c.stats.RefusedFull++
		c.emit(refuseFull(c.m.Root))
		return e, true
	}
	return c.x.create(c.m.Root, n, c.nowNs), false
}

// reserve takes a place for a new entry, or reports the bound reached.
func (x *XsyncMap) reserve() bool {
	if x.pending.Add(1) > int64(x.maxPending) {
		x.pending.Add(-1)
		return false
	}
	return true
}

// create gives e, a new entry of root whose place is reserved, a handle
// and a timer for e.timeout from nowNs, and returns it.
func (x *XsyncMap) create(root uint64, e xentry, nowNs int64) xentry {
	x.mu.Lock()
	h := x.free[len(x.free)-1]
	x.free = x.free[:len(x.free)-1]
	x.roots[h] = root
	x.w.Schedule(h, x.clamp(x.deadlineAfter(nowNs, e.timeout)))
	x.mu.Unlock()
	e.h = h
	return e
}

// rearm moves h's timer to deadline.
func (x *XsyncMap) rearm(h uint32, deadline uint64) {
	x.mu.Lock()
	x.w.Reschedule(h, x.clamp(deadline))
	x.mu.Unlock()
}

// release stops h's timer, frees h and the entry's place.
func (x *XsyncMap) release(h uint32) {
	x.mu.Lock()
	x.w.Cancel(h)
	x.roots[h] = 0
	x.free = append(x.free, h)
	x.mu.Unlock()
	x.pending.Add(-1)
}

// clamp limits a deadline to the wheel's reach (see GoMap.arm). Under mu.
func (x *XsyncMap) clamp(deadline uint64) uint64 {
	return min(deadline, x.w.Now()+timerwheel.MaxDelay)
}

// xexpire is one Expire call's state, shared with its Compute callback.
type xexpire struct {
	x      *XsyncMap
	root   uint64
	h      uint32
	nowNs  int64
	out    ackcore.Outcome
	has    bool
	orphan uint64
}

// step expires the root whose timer h fired, unless the root ended or its
// timer was re-armed since (then h is no longer its due timer).
func (c *xexpire) step(e xentry, loaded bool) (xentry, bool) {
	if !loaded || e.h != c.h {
		return e, !loaded
	}
	x := c.x
	x.mu.Lock()
	if x.w.Scheduled(c.h) { // re-armed by a RESET or INIT after it fired
		x.mu.Unlock()
		return e, false
	}
	x.roots[c.h] = 0
	x.free = append(x.free, c.h)
	x.mu.Unlock()
	x.pending.Add(-1)
	if e.word&flagInit != 0 {
		c.out = ackcore.Outcome{Root: c.root, Task: e.word & taskMask, Kind: ackcore.Failed, Reason: ackcore.ReasonTimeout, Latency: x.latency(c.nowNs, e.start)}
		c.has = true
	} else {
		c.orphan++
	}
	return e, true
}

// Expire appends the outcomes of roots whose deadline has passed, at most
// cap(out)-len(out) of them; more is true when it stopped for lack of room.
// Safe for concurrent use.
func (x *XsyncMap) Expire(out []ackcore.Outcome) (_ []ackcore.Outcome, more bool) {
	nowNs, nowTick := x.now()
	c := &xexpire{x: x, nowNs: nowNs}
	fn := c.step
	var st ackcore.Stats
	more = true
	for len(out) < cap(out) {
		x.mu.Lock()
		h, ok := x.w.Expire(nowTick)
		root := x.roots[h]
		x.mu.Unlock()
		if !ok {
			more = false
			break
		}
		c.root, c.h, c.has = root, h, false
		x.m.Compute(root, fn)
		if c.has {
			st.FailedTimeout++
			out = append(out, c.out)
		}
	}
	st.Orphans = c.orphan
	x.add(&st)
	return out, more
}

// Verify checks XsyncMap's invariants when no call is in flight: every
// entry holds a distinct scheduled handle that maps back to its root, the
// free list holds the others, and the counts agree.
func (x *XsyncMap) Verify() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	n, pending := 0, int(x.pending.Load())
	var err error
	x.m.Range(func(root uint64, e xentry) bool {
		n++
		switch {
		case x.roots[e.h] != root:
			err = fmt.Errorf("baseline: XsyncMap: root %#x holds handle %d, which maps to %#x", root, e.h, x.roots[e.h])
		case !x.w.Scheduled(e.h):
			err = fmt.Errorf("baseline: XsyncMap: root %#x has no timer", root)
		case e.word&flagFailed != 0 && e.word&flagInit != 0:
			err = fmt.Errorf("baseline: XsyncMap: root %#x both failed-before-INIT and INIT", root)
		case e.word&flagDrain != 0 && (e.word&(flagInit|flagFailed) != 0 || e.val == 0):
			err = fmt.Errorf("baseline: XsyncMap: root %#x a drain with INIT, failed-before-INIT or nothing owed", root)
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	if n != pending || n > x.maxPending || n+len(x.free) != x.maxPending || x.w.Len() != n {
		return fmt.Errorf("baseline: XsyncMap: %d entries, pending %d, %d free handles, %d timers, MaxPending %d",
			n, pending, len(x.free), x.w.Len(), x.maxPending)
	}
	return nil
}
