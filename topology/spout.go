package topology

import (
	"container/heap"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
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
	retryQ retryHeap
	errs   errBox

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

	hist    *hdrhistogram.Histogram // latencies since the last publish
	pubHist *hdrhistogram.Histogram // guarded by pub's mutex
}

type slot struct {
	root    uint64
	msgID   any
	values  []any
	stream  *stream
	born    int64 // this attempt's emit time
	due     int64 // the replay time while waiting
	direct  int32 // the EmitDirect task, or -1
	task    int32 // local task
	attempt uint32
	state   slotState
	probe   probeKind // what the root is to the breaker
	gen     uint64    // the breaker opening it probes
	lastErr error
	trace   *rootTrace // this attempt's, when traced
}

// heldMsg is a new message the breaker holds: what its emit gave.
type heldMsg struct {
	msgID   any
	values  []any
	stream  *stream
	direct  int32
	attempt uint32
}

type slotState uint8

const (
	slotFree slotState = iota
	slotInFlight
	slotWaiting // failed, waiting for its replay
)

type amoAck struct {
	task  int
	msgID any
}

// errBox carries bolts' errors to the spout: a bolt puts the error for a
// root before it sends the FAIL, so it is there when the Failed outcome
// arrives. Failures are rare, so a mutex does.
type errBox struct {
	mu sync.Mutex
	m  map[uint64]error
}

// errBoxMax bounds the errors waiting; past it a failure is reported with
// ErrFailed.
const errBoxMax = 4096

func (b *errBox) put(root uint64, err error) {
	b.mu.Lock()
	if b.m == nil {
		b.m = map[uint64]error{}
	}
	if _, ok := b.m[root]; !ok && len(b.m) < errBoxMax {
		b.m[root] = err
	}
	b.mu.Unlock()
}

func (b *errBox) take(root uint64) error {
	b.mu.Lock()
	err, ok := b.m[root]
	if ok {
		delete(b.m, root)
	}
	b.mu.Unlock()
	if !ok || err == nil {
		return ErrFailed
	}
	return err
}

// sweep drops errors for roots no longer in flight (their root ended
// before the FAIL was applied).
func (b *errBox) sweep(live func(uint64) bool) {
	b.mu.Lock()
	if len(b.m) > 64 {
		for r := range b.m {
			if !live(r) {
				delete(b.m, r)
			}
		}
	}
	b.mu.Unlock()
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
		s.retryQ.slots = s.slots
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
	s.hist, s.pubHist = newHist(), newHist()
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

// isLive reports whether root is the one its slot waits on (any
// goroutine).
func (s *spoutExec) isLive(root uint64) bool {
	return s.live != nil && s.live[root&s.mask].Load() == root
}

// kill takes root out of the live table if it is there (any goroutine: a
// bolt failing it); it reports whether this call did. The slot stays in
// flight until the acker's outcome comes.
func (s *spoutExec) kill(root uint64) bool {
	return s.live != nil && s.live[root&s.mask].CompareAndSwap(root, 0)
}

// inFlight reports whether root is the one its slot waits on (the
// executor's own goroutine: it reads the slot, not the live table, which
// a failing bolt may have cleared).
func (s *spoutExec) inFlight(root uint64) bool {
	sl := &s.slots[root&s.mask]
	return sl.state == slotInFlight && sl.root == root
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
	if len(s.retryQ.idx) > 0 {
		d, timed := time.Duration(s.slots[s.retryQ.idx[0]].due-s.now), true
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

// replayAllowed reports whether a replay may start now: the breaker is
// closed, or the spout has no new message to probe with (then the
// breaker cannot judge the replay, and does not hold it).
func (s *spoutExec) replayAllowed() bool {
	return !s.brk.holding() || s.dry()
}

// dry reports whether the spout cannot give the breaker a new message:
// none is held, and no task may be asked for one, or those that may
// were asked and emitted none for OpenFor; or every held one is of a
// task whose slots its replays fill (twice MaxSpoutPending with none in
// flight: only a replay's end frees one, so the replays must go).
func (s *spoutExec) dry() bool {
	if s.nheld > 0 {
		for i := range s.held {
			if len(s.held[i]) > 0 && !s.slotsFull(i) {
				return false
			}
		}
		return true
	}
	return !s.roomForNew() || s.now-s.lastNew >= int64(s.brk.cfg.OpenFor)
}

// roomForNew reports whether some task may be asked for a new message.
func (s *spoutExec) roomForNew() bool {
	if s.quiet || s.top.draining.Load() {
		return false
	}
	for i := range s.spouts {
		if !s.done[i] && s.mayAsk(i) {
			return true
		}
	}
	return false
}

// mayAsk reports whether task i may be asked for tuples: it has room
// for a new root or, while the breaker holds new messages, room to hold
// one more (Next keeps being called then, so that untracked streams
// keep flowing).
func (s *spoutExec) mayAsk(i int) bool {
	if s.brk.holding() {
		return len(s.held[i]) < s.top.cfg.MaxSpoutPending
	}
	return s.roomFor(i)
}

// roomFor reports whether task i may emit a new root: fewer than the
// bound in flight, and fewer than MaxSpoutPending waiting for a replay.
// A root waiting out its backoff is not in flight (the acker holds
// nothing for it), so it does not take a slot of the window that keeps
// the pipeline busy: at a 20% fail rate and a 10 ms backoff it would
// otherwise hold half of a 1024-root window idle.
func (s *spoutExec) roomFor(i int) bool {
	return s.pending[i] < s.bound && s.waiting[i] < s.top.cfg.MaxSpoutPending
}

// roomToStart reports whether task i may start a message the breaker
// held: fewer than the bound in flight, and a slot of its own (a task
// uses at most twice MaxSpoutPending). Unlike roomFor it does not wait
// for the replays to drain: with MaxSpoutPending of them waiting, the
// probe that lets them go is a held message.
func (s *spoutExec) roomToStart(i int) bool {
	return s.pending[i] < s.bound && !s.slotsFull(i)
}

// slotsFull reports whether task i's roots in flight and waiting for a
// replay take all its slots (twice MaxSpoutPending).
func (s *spoutExec) slotsFull(i int) bool {
	return s.pending[i]+s.waiting[i] >= 2*s.top.cfg.MaxSpoutPending
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

// emit is the spout collector's emit: untracked when msgID is nil or at
// most once, otherwise a new root in a free slot.
func (s *spoutExec) emit(task int, st *stream, direct int, msgID any, values []any) error {
	if s.quiet {
		return fmt.Errorf("topology: spout %q: emit after stop", s.comp.name)
	}
	if msgID == nil || s.inbox == nil {
		targets, err := s.route(st, values, direct)
		if err != nil {
			return err
		}
		src := s.tasks[task]
		for _, dst := range targets {
			s.push(s.newTuple(st, values, src, dst), false)
		}
		s.m.Emitted++
		s.emitted++
		if msgID != nil {
			s.atMostOnce = append(s.atMostOnce, amoAck{task, msgID})
		}
		return nil
	}
	h := heldMsg{msgID: msgID, values: values, stream: st, direct: int32(direct), attempt: 1}
	if r := s.redeliver[task]; r != nil {
		h.attempt = uint32(min(max(int64(r.Attempt(msgID)), 1), math.MaxUint32))
	}
	if len(s.held[task]) > 0 || !s.brk.allowNew() || s.brk.holding() && !s.roomToStart(task) {
		// The breaker holds it (or holds older ones of the task).
		if len(s.held[task]) >= s.top.cfg.MaxSpoutPending {
			return fmt.Errorf("topology: spout %q task %d: %d messages held by the breaker, no room for another (emit at most one tracked tuple per Next)",
				s.comp.name, s.tasks[task], len(s.held[task]))
		}
		if _, err := s.route(st, values, direct); err != nil {
			return err // refused now, as an emit that starts at once would be
		}
		s.held[task] = append(s.held[task], h)
		s.nheld++
		s.m.Held++
	} else if err := s.startNew(task, &h); err != nil {
		return err
	}
	s.lastNew = s.now
	s.m.Pending++
	s.m.Emitted++
	s.emitted++
	return nil
}

// startNew starts a new message in a free slot (its task has room).
func (s *spoutExec) startNew(task int, h *heldMsg) error {
	if len(s.free) == 0 {
		return fmt.Errorf("topology: spout %q task %d: %d roots pending, no room for another (emit at most one tracked tuple per Next)",
			s.comp.name, s.tasks[task], len(s.slots))
	}
	idx := s.free[len(s.free)-1]
	sl := &s.slots[idx]
	*sl = slot{msgID: h.msgID, values: h.values, stream: h.stream, direct: h.direct, task: int32(task), attempt: h.attempt}
	sl.probe, sl.gen = s.brk.startNew(h.attempt == 1)
	if err := s.start(idx, sl); err != nil {
		*sl = slot{}
		return err
	}
	s.free = s.free[:len(s.free)-1]
	s.pending[task]++
	return nil
}

// startHeld starts the held messages the breaker lets through, oldest
// first in each task, while their task has room.
func (s *spoutExec) startHeld() bool {
	did := false
	for i := 0; s.nheld > 0 && i < len(s.held); i++ {
		for len(s.held[i]) > 0 && s.brk.allowNew() && s.roomToStart(i) && !(s.staged() && did) {
			h := s.held[i][0]
			s.held[i][0] = heldMsg{}
			s.held[i] = s.held[i][1:]
			s.nheld--
			s.m.Held--
			if err := s.startNew(i, &h); err != nil {
				// The values were routed at the emit: as for a replay,
				// a route that fails now is a bug, reported, not lost.
				s.m.Pending--
				s.m.FailedFinal++
				s.m.DeadLettered++
				f := Failure{Reason: Explicit, Err: err, Attempts: int(h.attempt)}
				if s.top.cfg.DeadLetter != nil {
					s.deadLetter(int32(i), DeadLetter{Component: s.comp.name, Task: s.tasks[i], Stream: h.stream.name, MsgID: h.msgID, Values: h.values, Failure: f})
				}
				s.fail(int32(i), h.msgID, &f)
				continue
			}
			did = true
		}
		if len(s.held[i]) == 0 {
			s.held[i] = nil // let the backing array go
		}
	}
	return did
}

// start emits the slot's values as a new root (a first attempt or a
// replay) and queues its INIT.
func (s *spoutExec) start(idx uint32, sl *slot) error {
	root := s.gen.next()<<s.slotBits | uint64(idx)
	for root == 0 {
		root = s.gen.next()<<s.slotBits | uint64(idx)
	}
	targets, err := s.route(sl.stream, sl.values, int(sl.direct))
	if err != nil {
		return err
	}
	// Live before the first tuple can be published: a bolt that sees a
	// tuple of the root sees it live (the ring's publish orders the two).
	sl.root, sl.born, sl.state = root, s.now, slotInFlight
	s.live[idx].Store(root)
	a := anchor{root: root, born: s.now, spout: s.ackTask[sl.task], attempt: sl.attempt}
	sl.trace = nil
	if s.traceIn--; s.traceIn == 0 {
		s.traceIn = s.traceEvery
		sl.trace = &rootTrace{}
	}
	var val uint64
	src := s.tasks[sl.task]
	for _, dst := range targets {
		t := s.newTuple(sl.stream, sl.values, src, dst)
		a.edge = s.gen.next()
		val ^= a.edge
		t.anchors.one, t.anchors.n = a, 1
		t.attempt = sl.attempt
		if sl.trace != nil {
			t.trace = sl.trace.add(dst, s.now)
		}
		s.push(t, false)
	}
	if sl.attempt == 1 {
		s.brk.started(s.now)
	}
	m := ackcore.Msg{Root: root, Val: val, Task: s.ackTask[sl.task], Kind: ackcore.Init}
	if s.top.cfg.Port != nil {
		m.TimeoutMs = uint32(s.top.cfg.MessageTimeout / time.Millisecond)
	}
	if len(s.initQ) > 0 {
		s.initQ = append(s.initQ, m)
	} else if ok, err := s.sender.TrySend(m); err != nil {
		s.m.AckerErrors++
	} else if !ok {
		s.initQ = append(s.initQ, m)
	}
	return nil
}

// sendInits offers the acker the INITs it could not take before.
func (s *spoutExec) sendInits() bool {
	n := 0
	for n < len(s.initQ) {
		ok, err := s.sender.TrySend(s.initQ[n])
		if err != nil {
			s.m.AckerErrors++
		} else if !ok {
			break
		}
		n++
	}
	s.initQ = append(s.initQ[:0], s.initQ[n:]...)
	return n > 0
}

// handle applies outcomes.
func (s *spoutExec) handle(outs []ackcore.Outcome) {
	for i := range outs {
		o := &outs[i]
		idx := uint32(o.Root & s.mask)
		if o.Kind == ackcore.Refused || int(idx) >= len(s.slots) {
			s.m.Stale++
			continue
		}
		sl := &s.slots[idx]
		if sl.state != slotInFlight || sl.root != o.Root {
			s.m.Stale++
			continue
		}
		lat := time.Duration(s.now - sl.born)
		s.live[idx].Store(0)
		if o.Kind == ackcore.Completed {
			s.m.Completed++
			recordLatency(s.hist, lat)
			s.adapt.record(lat)
			if sl.attempt == 1 {
				s.brk.ended(sl.born)
			}
			s.brk.record(s.now, true, sl.probe, sl.gen, sl.attempt == 1, sl.born)
			msgID, task := sl.msgID, sl.task
			s.release(idx)
			s.ack(task, msgID)
			continue
		}
		r := reasonOf(o.Reason)
		f := Failure{Reason: r, Attempts: int(sl.attempt), Latency: lat}
		if r == Explicit {
			f.Err = s.errs.take(o.Root)
			if _, ok := f.Err.(*PanicError); ok {
				f.Reason, r = Panic, Panic
			}
		}
		if r == Timeout && sl.trace != nil {
			s.attribute(&f, sl.trace)
		}
		s.m.FailedBy[r]++
		if sl.attempt == 1 {
			s.brk.ended(sl.born)
		}
		if r != Stopped {
			s.brk.record(s.now, false, sl.probe, sl.gen, sl.attempt == 1, sl.born)
		}
		s.failed(idx, sl, f)
	}
}

func reasonOf(r ackcore.Reason) Reason {
	switch r {
	case ackcore.ReasonExplicit:
		return Explicit
	case ackcore.ReasonTimeout:
		return Timeout
	case ackcore.ReasonFull:
		return Rejected
	case ackcore.ReasonStopped:
		return Stopped
	}
	return AckerLost // ReasonLost, and anything an acker adds later
}

// attribute says in f where the traced root's unacked tuples are, and
// counts the timeout against each component holding some.
func (s *spoutExec) attribute(f *Failure, tr *rootTrace) {
	f.Traced = true
	f.Held = tr.held(s.top, s.now)
	var counted []*component
	for _, h := range f.Held {
		if c := s.top.taskComponent(h.Task); !slices.Contains(counted, c) {
			counted = append(counted, c)
			c.timeoutsHeld.Add(1)
		}
	}
}

// failed decides a failed attempt's fate: a replay, or the end (dead
// letter, or stopped).
func (s *spoutExec) failed(idx uint32, sl *slot, f Failure) {
	cfg := &s.top.cfg
	switch {
	case f.Reason == Stopped || s.quiet:
		if f.Reason != Stopped {
			inner := f
			f = Failure{Reason: Stopped, Err: &inner, Attempts: f.Attempts, Latency: f.Latency}
		}
		s.final(idx, sl, &f, false)
	case s.redeliver[sl.task] != nil:
		s.final(idx, sl, &f, false) // its source redelivers, or gives up
	case int(sl.attempt) < cfg.Retry.MaxAttempts:
		sl.state = slotWaiting
		s.pending[sl.task]--
		s.waiting[sl.task]++
		sl.lastErr = f.Err
		sl.due = s.now + int64(s.backoff(int(sl.attempt)))
		heap.Push(&s.retryQ, idx)
	default:
		s.final(idx, sl, &f, true)
	}
}

// backoff is the wait after failed attempt k (RetryPolicy.Delay).
func (s *spoutExec) backoff(k int) time.Duration {
	return s.top.cfg.Retry.Delay(k, s.gen.float())
}

// final reports a message the engine gives up on.
func (s *spoutExec) final(idx uint32, sl *slot, f *Failure, dead bool) {
	msgID, task := sl.msgID, sl.task
	var d DeadLetter
	if dead {
		s.m.DeadLettered++
		d = DeadLetter{Component: s.comp.name, Task: s.tasks[task], Stream: sl.stream.name, MsgID: msgID, Values: sl.values, Failure: *f}
	}
	s.m.FailedFinal++
	s.release(idx) // the bookkeeping first: a panic in the hook or in Fail cannot undo it
	if dead && s.top.cfg.DeadLetter != nil {
		s.deadLetter(task, d)
	}
	s.fail(task, msgID, f)
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

func (s *spoutExec) release(idx uint32) {
	sl := &s.slots[idx]
	s.pending[sl.task]--
	s.m.Pending--
	*sl = slot{}
	s.free = append(s.free, idx)
}

// replayDue replays the failed roots whose backoff has passed, while the
// breaker lets them through.
func (s *spoutExec) replayDue() bool {
	did := false
	for len(s.retryQ.idx) > 0 && !s.quiet {
		idx := s.retryQ.idx[0]
		sl := &s.slots[idx]
		if sl.due > s.now || !s.replayAllowed() || s.staged() && did || s.pending[sl.task] >= s.bound {
			break
		}
		heap.Pop(&s.retryQ)
		s.waiting[sl.task]--
		s.pending[sl.task]++
		sl.attempt++
		sl.lastErr = nil
		sl.probe = probeNone
		if s.brk.holding() {
			sl.probe = probeDry // let through because the spout ran dry
		}
		if err := s.start(idx, sl); err != nil {
			// The values were routed before; a route that fails now (a
			// field that hashed once cannot stop hashing) is a bug, but
			// the message is still reported, not lost.
			s.final(idx, sl, &Failure{Reason: Explicit, Err: err, Attempts: int(sl.attempt)}, true)
			continue
		}
		s.m.Replayed++
		did = true
	}
	return did
}

// stopEmitting is the executor's first step of a stop: it gives up on the
// roots waiting for a replay, drops what is staged (its roots are reported
// Stopped by the acker or by sweepStopped), offers the acker its INITs
// once, and tells the topology.
func (s *spoutExec) stopEmitting() {
	for len(s.retryQ.idx) > 0 {
		idx := heap.Pop(&s.retryQ).(uint32)
		sl := &s.slots[idx]
		s.waiting[sl.task]--
		s.pending[sl.task]++ // release takes it from pending
		f := Failure{Reason: Stopped, Attempts: int(sl.attempt), Err: sl.lastErr}
		s.final(idx, sl, &f, false)
	}
	for i := range s.held {
		for _, h := range s.held[i] {
			// Never started: no attempt was made of a new message.
			s.m.Pending--
			s.m.Held--
			s.m.FailedFinal++
			s.fail(int32(i), h.msgID, &Failure{Reason: Stopped, Attempts: int(h.attempt) - 1})
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
			s.m.FailedBy[Stopped]++
			s.final(uint32(i), sl, &Failure{Reason: Stopped, Attempts: int(sl.attempt)}, false)
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

// control runs the breaker and the adaptive bound on the clock; it
// reports whether the breaker went half open (the loop goes round again
// to start its probes).
func (s *spoutExec) control() bool {
	moved := s.brk.tick(s.now, &s.m)
	if b, ok := s.adapt.tick(s.now, s.bound, s.top.cfg.MaxSpoutPending); ok {
		s.bound = b
		s.m.Bound = int64(b)
	}
	if s.live != nil && s.now-s.lastPub >= publishEvery {
		s.errs.sweep(s.inFlight)
	}
	return moved
}

func (s *spoutExec) publish() {
	s.lastPub = s.now
	s.m.Waiting = int64(len(s.retryQ.idx)) // every waiting root is in the retry queue
	s.pub.Lock()
	s.pub.m = s.m
	s.pubHist.Merge(s.hist)
	s.pub.Unlock()
	s.hist.Reset()
}

func (s *spoutExec) maybePublish() {
	if s.now-s.lastPub >= publishEvery || s.now < s.lastPub {
		s.publish()
	}
}

// retryHeap orders the slots waiting for a replay by due time.
type retryHeap struct {
	idx   []uint32
	slots []slot
}

func (h *retryHeap) Len() int           { return len(h.idx) }
func (h *retryHeap) Less(i, j int) bool { return h.slots[h.idx[i]].due < h.slots[h.idx[j]].due }
func (h *retryHeap) Swap(i, j int)      { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *retryHeap) Push(x any)         { h.idx = append(h.idx, x.(uint32)) }
func (h *retryHeap) Pop() any {
	x := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	return x
}

// check verifies the executor's bookkeeping (invariants builds, every
// pass): the pending counts match the slots in use, the free list holds
// exactly the free slots, and a slot's root is live only while it is in
// flight.
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
	held := 0
	for i := range s.held {
		held += len(s.held[i])
	}
	if inUse != sum || int64(sum+held) != s.m.Pending || held != s.nheld || int64(held) != s.m.Held || inUse+len(s.free) != len(s.slots) || len(s.retryQ.idx) != waiting {
		panic(fmt.Sprintf("topology: spout %q: %d slots in use, in flight %v, waiting %v (counted %d), %d free of %d, %d in the retry queue",
			s.comp.name, inUse, s.pending, s.waiting, s.m.Pending, len(s.free), len(s.slots), len(s.retryQ.idx)))
	}
}
