package topology

import (
	"container/heap"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/invariants"
)

// spoutExec runs the tasks of one spout executor: it calls Next, keeps
// every pending root's values in a slot, takes the acker's outcomes from
// its own inbox in the same loop (never blocking in a send while its inbox
// may be full), replays failures and reports final outcomes.
type spoutExec struct {
	executor
	spouts  []Spout
	done    []bool // by local task: the task called Done
	ndone   int
	ackTask []uint32 // by local task: its task number at the acker
	pending []int    // by local task: roots in flight (what the bound counts)
	waiting []int    // by local task: roots waiting for a replay's backoff
	// held[i] are task i's new messages the breaker holds (or that wait
	// behind them), oldest first: emitted by Next, not started yet. At
	// most MaxSpoutPending a task; nheld counts them all.
	held    [][]heldMsg
	nheld   int
	lastNew int64 // when Next last emitted a new tracked message
	bound   int   // the pending bound per task (adaptive or fixed)
	rr      int   // the next local task to ask
	// redeliver[i] is spouts[i] when it is a Redeliverer (one attempt per
	// message, each failure to Fail), else nil.
	redeliver []Redeliverer

	inbox    acker.Inbox // nil at most once
	outcomes []ackcore.Outcome
	initQ    []ackcore.Msg // INITs the acker could not take yet

	// Slots: one per pending root. A root id is random in its high bits
	// and its slot's index in the low slotBits, so an outcome finds its
	// slot without a map.
	slots    []slot
	free     []uint32
	slotBits uint
	mask     uint64
	// live[i] is the root slot i now waits on (0: none); stored by this
	// executor, read atomically by bolts (no ACK is sent for a root not
	// live: it is counted late), cleared by a failing bolt's
	// compare-and-swap.
	live   []atomic.Uint64
	retryQ retryHeap // roots waiting for their replay (the breaker may hold them)
	// passQ holds the replays a failed probe of a new message released:
	// each goes at its backoff whatever the breaker's state, once per
	// episode of the breaker (releaseReplays).
	passQ retryHeap
	errs  errBox
	// lastSweep is now at the last sweep of errs, which control runs
	// once a publishEvery on this clock of its own: a publish at a full
	// latency buffer does not put it off.
	lastSweep int64

	// Tracing (trace.go): the next root is traced when traceIn counts
	// down to 0, then it restarts at traceEvery. Tracing off starts it
	// at -1: it never reaches 0.
	traceIn, traceEvery int

	coll       SpoutCollector
	emitted    int // tracked and untracked emits by the current Next
	atMostOnce []amoAck

	wake     chan time.Time // Stop, Drain and the timer poke the idle wait
	timer    *time.Timer
	quiet    bool // told the topology it stopped emitting
	finished bool // told the topology it is done

	brk   breaker
	adapt adaptive

	// lats are the completed roots' latencies (µs) since the last
	// publish, which records them in pubHist: a merge of one histogram
	// into another walks every bucket up to the highest value (thousands),
	// and the executor publishes each time it idles, so a merge cost more
	// than recording the few values it carried. At most maxLats.
	lats    []int64
	pubHist *hdrhistogram.Histogram // guarded by pub's mutex
}

// maxLats is how many latencies the spout executor holds before it
// publishes (a clock that does not move never makes a publish due).
const maxLats = 4096

type amoAck struct {
	task  int
	msgID any
}

func newSpoutExec(base executor, spouts []Spout, ackTask []uint32, cfg *Config) *spoutExec {
	s := &spoutExec{executor: base, spouts: spouts, ackTask: ackTask}
	n := len(spouts)
	s.redeliver = make([]Redeliverer, n)
	for i, sp := range spouts {
		s.redeliver[i], _ = sp.(Redeliverer)
	}
	s.done = make([]bool, n)
	s.pending = make([]int, n)
	s.waiting = make([]int, n)
	s.held = make([][]heldMsg, n)
	s.bound = cfg.MaxSpoutPending
	s.m.Bound = int64(s.bound)
	if cfg.acking() {
		// A task holds at most MaxSpoutPending roots in flight and as
		// many waiting for a replay (see roomFor).
		need := 2 * n * cfg.MaxSpoutPending
		s.slotBits = uint(bits.Len(uint(need - 1)))
		s.mask = 1<<s.slotBits - 1
		s.slots = make([]slot, 1<<s.slotBits)
		s.live = make([]atomic.Uint64, len(s.slots))
		byDue := func(a, b uint32) bool { return s.slots[a].due < s.slots[b].due }
		s.retryQ.Before, s.passQ.Before = byDue, byDue
		s.free = make([]uint32, 0, len(s.slots))
		for i := len(s.slots) - 1; i >= 0; i-- {
			s.free = append(s.free, uint32(i))
		}
	}
	s.traceEvery, s.traceIn = cfg.TraceEvery, cfg.TraceEvery
	if cfg.TraceEvery <= 0 {
		s.traceIn = -1
	}
	s.coll.s = s
	s.wake = make(chan time.Time, 1)
	s.lats, s.pubHist = make([]int64, 0, maxLats), newHist()
	s.brk.cfg = cfg.Breaker
	s.adapt.cfg = cfg.Adaptive
	if cfg.Adaptive.TargetP99 > 0 {
		s.adapt.window = newHist()
	}
	return s
}

// poke wakes the executor's idle wait.
func (s *spoutExec) poke() {
	select {
	case s.wake <- time.Time{}:
	default:
	}
}

func (s *spoutExec) run() {
	defer s.top.execDone(&s.executor)
	s.timer = time.AfterFunc(time.Hour, s.poke)
	s.timer.Stop()
	defer s.timer.Stop()
	for {
		s.clock()
		did := false
		if s.inbox != nil {
			if s.outcomes = s.inbox.Poll(s.outcomes[:0]); len(s.outcomes) > 0 {
				did = true
				s.handle(s.outcomes)
			}
		}
		stopping := s.top.stopping.Load()
		if stopping && !s.quiet {
			s.stopEmitting()
		}
		if !stopping {
			did = s.replayDue() || did
			did = s.startHeld() || did
			did = s.sendInits() || did
			if !s.staged() && len(s.initQ) == 0 && !s.top.draining.Load() {
				did = s.callNext() || did
			}
		}
		s.flushOuts(false)
		if s.sender != nil {
			if err := s.sender.Flush(); err != nil {
				s.m.AckerErrors++
			}
		}
		did = s.control() || did
		if invariants.Enabled && s.live != nil {
			s.check()
		}
		s.checkFinished()
		s.maybePublish()
		if s.quiet && s.inbox == nil {
			break
		}
		if did {
			continue
		}
		if !s.idle() {
			break // the acker stopped and every outcome was taken
		}
	}
	s.sweepStopped()
	closeTasks(&s.executor, s.spouts)
	s.publish()
}

// idle waits for an outcome, the next timed event, or a poke; it returns
// false once the acker has stopped and every outcome was taken.
func (s *spoutExec) idle() bool {
	s.publish()
	wait := time.Duration(-1)
	switch {
	case s.staged() || len(s.initQ) > 0:
		wait = 50 * time.Microsecond // downstream or the acker is full: retry soon
	case s.canAsk():
		wait = s.top.cfg.SpoutWait // Next emitted nothing: Storm's spout wait
	}
	if len(s.passQ.S) > 0 {
		if d := time.Duration(s.slots[s.passQ.S[0]].due - s.now); wait < 0 || d < wait {
			wait = max(d, 0)
		}
	}
	if len(s.retryQ.S) > 0 {
		d, timed := time.Duration(s.slots[s.retryQ.S[0]].due-s.now), true
		if !s.replayAllowed() { // until the spout runs dry, else the breaker's next event
			d, timed = time.Duration(s.lastNew+int64(s.brk.cfg.OpenFor)-s.now), s.nheld == 0 && s.roomForNew()
		}
		if timed && (wait < 0 || d < wait) {
			wait = max(d, 0)
		}
	}
	if d, ok := s.brk.nextEvent(s.now); ok && (wait < 0 || d < wait) {
		wait = d
	}
	if d, ok := s.adapt.nextEvent(s.now); ok && (wait < 0 || d < wait) {
		wait = d
	}
	// A fake clock does not move while we sleep: wait at most maxIdle in
	// real time before looking at it again.
	if wait > maxIdle || (wait < 0 && s.inbox == nil) {
		wait = maxIdle
	}
	if wait >= 0 {
		s.timer.Reset(wait)
	}
	if s.inbox == nil {
		<-s.wake
		return true
	}
	var ok bool
	s.outcomes, ok = s.inbox.WaitUntil(s.outcomes[:0], s.wake)
	s.timer.Stop()
	if len(s.outcomes) > 0 {
		s.clock()
		s.handle(s.outcomes)
	}
	return ok
}

// maxIdle is the longest a spout executor sleeps without looking at the
// clock (which a test may be moving by hand).
const maxIdle = 10 * time.Millisecond

// canAsk reports whether some task may be asked for a tuple now.
func (s *spoutExec) canAsk() bool {
	if s.inbox == nil {
		return !s.quiet && !s.top.draining.Load() && s.ndone < len(s.spouts)
	}
	return s.roomForNew()
}

// callNext asks the tasks for tuples, round robin, until a round emits
// nothing or a batch of calls was made.
func (s *spoutExec) callNext() bool {
	did := false
	for calls := 0; calls < s.batch; {
		round := false
		for range s.spouts {
			i := s.rr
			if s.rr++; s.rr == len(s.spouts) {
				s.rr = 0
			}
			if s.done[i] || (s.inbox != nil && !s.mayAsk(i)) || s.top.draining.Load() {
				continue
			}
			s.coll.task = i
			s.emitted = 0
			s.next(i)
			calls++
			if s.emitted > 0 {
				round, did = true, true
			}
			s.ackAtMostOnce()
			if s.inbox != nil && int64(s.pending[i]) > s.m.PendingHigh {
				s.m.PendingHigh = int64(s.pending[i])
			}
			if s.pending[i] >= s.bound {
				s.adapt.hitBound = true
			}
		}
		if !round || s.staged() && calls >= s.batch/2 {
			break
		}
	}
	return did
}

// ackAtMostOnce calls Ack for the messages Next emitted at most once.
func (s *spoutExec) ackAtMostOnce() {
	for _, a := range s.atMostOnce {
		s.m.Completed++
		s.ack(int32(a.task), a.msgID)
	}
	clear(s.atMostOnce)
	s.atMostOnce = s.atMostOnce[:0]
}

// The calls into user code on a spout executor's goroutine, each
// recovering a panic (counted, logged, and with Config.PanicStops the
// topology's stop). The engine's bookkeeping for the message is done
// before each is called.

func (s *spoutExec) next(task int) {
	defer s.recoverIn(task, "Next")
	s.spouts[task].Next(&s.coll)
}

func (s *spoutExec) ack(task int32, msgID any) {
	defer s.recoverIn(int(task), "Ack")
	s.spouts[task].Ack(msgID)
}

func (s *spoutExec) fail(task int32, msgID any, f *Failure) {
	defer s.recoverIn(int(task), "Fail")
	s.spouts[task].Fail(msgID, f)
}

func (s *spoutExec) deadLetter(task int32, d DeadLetter) {
	defer s.recoverIn(int(task), "DeadLetter")
	s.top.cfg.DeadLetter(d)
}

// recoverIn is deferred by the calls into user code: recover must be
// called by the deferred function itself.
func (s *spoutExec) recoverIn(task int, method string) {
	if v := recover(); v != nil {
		s.recovered(s.tasks[task], method, v)
	}
}

// stopEmitting is the executor's first step of a stop: it gives up on the
// roots waiting for a replay, drops what is staged (its roots are reported
// Stopped by the acker or by sweepStopped), offers the acker its INITs
// once, and tells the topology.
func (s *spoutExec) stopEmitting() {
	for _, q := range [...]*retryHeap{&s.retryQ, &s.passQ} {
		for len(q.S) > 0 {
			idx := heap.Pop(q).(uint32)
			sl := &s.slots[idx]
			s.waiting[sl.task]--
			s.pending[sl.task]++ // release takes it from pending
			f := Failure{Reason: ackcore.ReasonStopped, Attempts: int(sl.attempt), Err: sl.lastErr}
			s.final(idx, sl, &f, false)
		}
	}
	for i := range s.held {
		for _, h := range s.held[i] {
			// Never started: no attempt was made of a new message.
			s.m.Pending--
			s.m.Held--
			s.m.FailedFinal++
			s.fail(int32(i), h.msgID, &Failure{Reason: ackcore.ReasonStopped, Attempts: int(h.attempt) - 1})
		}
		s.held[i] = nil
	}
	s.nheld = 0
	if s.inbox != nil {
		s.dropStaged()
		s.sendInits()
		if err := s.sender.Flush(); err != nil {
			s.m.AckerErrors++
		}
	} else {
		s.flushOuts(true) // at most once: the tuples were acked at emit, deliver them
	}
	s.quiet = true
	s.top.spoutQuiet()
}

// sweepStopped reports, after the acker has stopped, the roots it never
// reported (their INIT did not reach it).
func (s *spoutExec) sweepStopped() {
	for i := range s.slots {
		if sl := &s.slots[i]; sl.state != slotFree {
			s.live[i].Store(0)
			s.m.FailedBy[ackcore.ReasonStopped]++
			s.final(uint32(i), sl, &Failure{Reason: ackcore.ReasonStopped, Attempts: int(sl.attempt)}, false)
		}
	}
}

// checkFinished tells the topology once every task is done and nothing is
// pending.
func (s *spoutExec) checkFinished() {
	if s.finished || s.quiet {
		return
	}
	if s.ndone < len(s.spouts) && !s.top.draining.Load() {
		return
	}
	if s.m.Pending == 0 && len(s.initQ) == 0 && !s.staged() {
		s.finished = true
		s.top.spoutFinished()
	}
}

// control runs the breaker, the adaptive bound and the sweep of stale
// errors (errBox.sweep) on the clock; it reports whether the breaker went
// half open (the loop goes round again to start its probes).
func (s *spoutExec) control() bool {
	moved := s.brk.tick(s.now, &s.m)
	if b, ok := s.adapt.tick(s.now, s.bound, s.top.cfg.MaxSpoutPending); ok {
		s.bound = b
		s.m.Bound = int64(b)
	}
	if s.live != nil && (s.now-s.lastSweep >= publishEvery || s.now < s.lastSweep) {
		s.lastSweep = s.now
		s.errs.sweep(s.inFlight)
	}
	return moved
}

func (s *spoutExec) publish() {
	s.lastPub = s.now
	s.m.Waiting = int64(len(s.retryQ.S) + len(s.passQ.S)) // every waiting root is in one of the queues
	s.pub.Lock()
	s.pub.m = s.m
	for _, us := range s.lats {
		_ = s.pubHist.RecordValue(us) // in range by construction (latencyUs)
	}
	s.pub.Unlock()
	s.lats = s.lats[:0]
}

func (s *spoutExec) maybePublish() {
	if s.now-s.lastPub >= publishEvery || s.now < s.lastPub {
		s.publish()
	}
}

// check verifies the executor's bookkeeping (invariants builds, every
// pass): the pending counts match the slots in use, the free list holds
// exactly the free slots, a slot's root is live only while it is in
// flight, and the latencies not yet published stay below maxLats in
// their buffer, never regrown.
func (s *spoutExec) check() {
	inUse, sum := 0, 0
	for i := range s.slots {
		sl := &s.slots[i]
		live := s.live[i].Load()
		switch {
		case sl.state == slotFree && live != 0,
			sl.state == slotInFlight && live != sl.root && live != 0, // 0: a bolt failed it
			sl.state == slotWaiting && live != 0:
			panic(fmt.Sprintf("topology: spout %q slot %d: state %d, root %#x, live %#x", s.comp.name, i, sl.state, sl.root, live))
		case sl.state == slotInFlight && (sl.root == 0 || sl.root&s.mask != uint64(i)):
			panic(fmt.Sprintf("topology: spout %q slot %d holds root %#x", s.comp.name, i, sl.root))
		}
		if sl.state != slotFree {
			inUse++
		}
	}
	waiting := 0
	for i, p := range s.pending {
		sum += p + s.waiting[i]
		waiting += s.waiting[i]
	}
	if len(s.lats) >= maxLats || cap(s.lats) != maxLats {
		panic(fmt.Sprintf("topology: spout %q holds %d latencies in a buffer of %d, bound %d", s.comp.name, len(s.lats), cap(s.lats), maxLats))
	}
	held := 0
	for i := range s.held {
		held += len(s.held[i])
	}
	if inUse != sum || int64(sum+held) != s.m.Pending || held != s.nheld || int64(held) != s.m.Held || inUse+len(s.free) != len(s.slots) || len(s.retryQ.S)+len(s.passQ.S) != waiting {
		panic(fmt.Sprintf("topology: spout %q: %d slots in use, in flight %v, waiting %v (counted %d), %d free of %d, %d+%d in the retry queues",
			s.comp.name, inUse, s.pending, s.waiting, s.m.Pending, len(s.free), len(s.slots), len(s.retryQ.S), len(s.passQ.S)))
	}
}
