package topology

import (
	"fmt"
	"math"
	"time"

	"github.com/xorack/xorack/ackcore"
)

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
	tried   uint64    // the breaker episode a failed probe released its replay in
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
// first in each task, while their task has room: at a close, all of them
// in one pass, whatever is staged. (They were emitted already, and are
// at most MaxSpoutPending a task. Started a few a pass, as Next's emits
// are, the first ones' failures could reopen the breaker before the
// others start: a poison tail held again, its replays waiting for probes
// that can only fail.)
func (s *spoutExec) startHeld() bool {
	did := false
	for i := 0; s.nheld > 0 && i < len(s.held); i++ {
		for len(s.held[i]) > 0 && s.brk.allowNew() && s.roomToStart(i) {
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
				f := Failure{Reason: ackcore.ReasonExplicit, Err: err, Attempts: int(h.attempt)}
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

func (s *spoutExec) release(idx uint32) {
	sl := &s.slots[idx]
	s.pending[sl.task]--
	s.m.Pending--
	*sl = slot{}
	s.free = append(s.free, idx)
}
