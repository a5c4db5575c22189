package topology

import (
	"container/heap"
	"slices"
	"sync"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/sliceheap"
)

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
			s.lats = append(s.lats, latencyUs(lat))
			s.adapt.record(lat)
			if sl.attempt == 1 {
				s.brk.ended(sl.born)
			}
			s.brk.record(s.now, true, sl.probe, sl.gen, sl.attempt == 1, sl.born)
			msgID, task := sl.msgID, sl.task
			s.release(idx)
			s.ack(task, msgID)
			if len(s.lats) == maxLats {
				// Published once the outcome is applied in full: the
				// root counted completed, no longer pending.
				s.publish()
			}
			continue
		}
		r := failReason(o.Reason)
		f := Failure{Reason: r, Attempts: int(sl.attempt), Latency: lat}
		if r == ackcore.ReasonExplicit {
			f.Err = s.errs.take(o.Root)
			if _, ok := f.Err.(*PanicError); ok {
				f.Reason, r = ackcore.ReasonPanic, ackcore.ReasonPanic
			}
		}
		if r == ackcore.ReasonTimeout && sl.trace != nil {
			s.attribute(&f, sl.trace)
		}
		s.m.FailedBy[r]++
		if sl.attempt == 1 {
			s.brk.ended(sl.born)
		}
		if r != ackcore.ReasonStopped && s.brk.record(s.now, false, sl.probe, sl.gen, sl.attempt == 1, sl.born) {
			s.releaseReplays()
		}
		s.failed(idx, sl, f)
	}
}

// failReason is the reason a Failed outcome from the acker counts under:
// its own when it is one an acker reports a root failed with, otherwise
// (none, invalid, panic, or one an acker adds later) ReasonLost.
func failReason(r ackcore.Reason) ackcore.Reason {
	switch r {
	case ackcore.ReasonExplicit, ackcore.ReasonTimeout, ackcore.ReasonFull, ackcore.ReasonStopped:
		return r
	}
	return ackcore.ReasonLost
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
	case f.Reason == ackcore.ReasonStopped || s.quiet:
		if f.Reason != ackcore.ReasonStopped {
			inner := f
			f = Failure{Reason: ackcore.ReasonStopped, Err: &inner, Attempts: f.Attempts, Latency: f.Latency}
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

// releaseReplays gives every replay waiting for the breaker its try, once
// per episode of the breaker (from its opening to its close): a probe of
// a new message failed, which cannot tell an outage from a poison
// message, so it must not hold the replays that could (one completing
// closes the breaker). They go at their own backoff; a failure among
// them is not counted and does not reopen, and the root waits for the
// breaker again. The failed probe's own root is not among them: it gets
// its try at the next failed probe.
func (s *spoutExec) releaseReplays() {
	ep := s.brk.episode
	keep := s.retryQ.S[:0]
	for _, idx := range s.retryQ.S {
		if sl := &s.slots[idx]; sl.tried != ep {
			sl.tried = ep
			s.passQ.S = append(s.passQ.S, idx)
		} else {
			keep = append(keep, idx)
		}
	}
	s.retryQ.S = keep
	heap.Init(&s.retryQ)
	heap.Init(&s.passQ)
}

// replayDue replays the failed roots whose backoff has passed: those a
// failed probe released, and the others while the breaker lets them
// through.
func (s *spoutExec) replayDue() bool {
	did := s.replayFrom(&s.passQ, false)
	return s.replayFrom(&s.retryQ, did) || did
}

// replayFrom replays q's roots whose backoff has passed (q is the retry
// queue, which the breaker may hold, or the released replays, which it
// does not); did says an earlier call replayed some.
func (s *spoutExec) replayFrom(q *retryHeap, did bool) bool {
	started := false
	for len(q.S) > 0 && !s.quiet {
		idx := q.S[0]
		sl := &s.slots[idx]
		if sl.due > s.now || q == &s.retryQ && !s.replayAllowed() || s.staged() && (did || started) || s.pending[sl.task] >= s.bound {
			break
		}
		heap.Pop(q)
		s.waiting[sl.task]--
		s.pending[sl.task]++
		sl.attempt++
		sl.lastErr = nil
		sl.probe = probeNone
		if s.brk.holding() {
			sl.probe = probeDry // let through while it holds: the spout ran dry, or a failed probe released it
		}
		if err := s.start(idx, sl); err != nil {
			// The values were routed before; a route that fails now (a
			// field that hashed once cannot stop hashing) is a bug, but
			// the message is still reported, not lost.
			s.final(idx, sl, &Failure{Reason: ackcore.ReasonExplicit, Err: err, Attempts: int(sl.attempt)}, true)
			continue
		}
		s.m.Replayed++
		started = true
	}
	return started
}

// retryHeap holds the slots waiting for a replay (their indexes), by due
// time (Before, set with the slots).
type retryHeap = sliceheap.Heap[uint32]
