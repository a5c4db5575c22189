// Package outq is the outcome inbox that netio's client and the
// harness's baselines hand their receivers: a queue many goroutines put
// into and one takes from, with the method set of acker.Inbox for
// T = ackcore.Outcome. It is internal: only the project builds inboxes;
// an embedder gets them from acker.Acker or netio.Client.
package outq

import (
	"sync"
	"sync/atomic"
	"time"
)

// Queue is an outcome inbox (acker.Inbox, for T = ackcore.Outcome) that
// many goroutines Put outcomes into and one goroutine takes them from
// (Poll, Wait, WaitUntil). It holds at most max outcomes (a Put that may wait waits for room), more
// only for a batch that came at once, or once Stopping was called (then
// Put never waits); max 0 means no bound. A Put wakes the consumer only
// when it waits (sleeping), so a consumer that polls costs the writers no
// channel operation, and Poll reads the length without the lock to skip
// an empty queue. After Close, Wait returns false once the consumer took
// what is left.
//
// The zero Queue is not ready: use New.
type Queue[T any] struct {
	n        atomic.Int64 // len(q), read without the lock by Poll
	mu       sync.Mutex
	cond     sync.Cond // writers waiting for room
	q        []T       // guarded by mu
	max      int
	waits    int         // guarded by mu: goroutines waiting on cond
	sleeping bool        // guarded by mu: the consumer waits on wake
	stopping bool        // guarded by mu: puts no longer wait
	closed   atomic.Bool // Close was called: nothing more is put
	wake     chan struct{}
}

// New returns an empty queue of at most max outcomes (0: no bound).
func New[T any](max int) *Queue[T] {
	q := &Queue[T]{max: max, wake: make(chan struct{}, 1)}
	q.cond.L = &q.mu
	return q
}

// Put appends outs. With wait, it first waits while the queue holds max
// outcomes or more (until the consumer takes them or Stopping is called).
func (q *Queue[T]) Put(outs []T, wait bool) {
	q.mu.Lock()
	for wait && q.max > 0 && len(q.q) >= q.max && !q.stopping {
		q.waits++
		q.cond.Wait()
		q.waits--
	}
	q.q = append(q.q, outs...)
	q.n.Store(int64(len(q.q)))
	wake := q.sleeping
	q.sleeping = false
	q.mu.Unlock()
	if wake {
		q.signal()
	}
}

func (q *Queue[T]) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Stopping makes every Put, the waiting ones too, stop waiting for room:
// the writers' owner is stopping and never waits on a consumer that
// stopped reading.
func (q *Queue[T]) Stopping() {
	q.mu.Lock()
	q.stopping = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// Close marks the end of the outcomes: Wait returns false once the
// consumer took what is left.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	q.closed.Store(true)
	q.mu.Unlock()
	q.signal()
}

// Len is how many outcomes the queue holds now (read without the lock).
func (q *Queue[T]) Len() int { return int(q.n.Load()) }

// Poll appends the outcomes available now to dst, without waiting.
func (q *Queue[T]) Poll(dst []T) []T {
	if q.n.Load() == 0 {
		return dst
	}
	q.mu.Lock()
	dst = append(dst, q.q...)
	q.q = q.q[:0]
	q.n.Store(0)
	if q.waits > 0 {
		q.cond.Broadcast()
	}
	q.mu.Unlock()
	return dst
}

// Wait appends at least one outcome to dst, waiting for it; ok is false
// once the queue is closed and every outcome was taken.
func (q *Queue[T]) Wait(dst []T) ([]T, bool) {
	return q.WaitUntil(dst, nil)
}

// WaitUntil is Wait that also returns, with what it has (possibly
// nothing), when wake fires.
func (q *Queue[T]) WaitUntil(dst []T, wake <-chan time.Time) ([]T, bool) {
	for {
		n := len(dst)
		if dst = q.Poll(dst); len(dst) > n {
			return dst, true
		}
		q.mu.Lock()
		if len(q.q) > 0 {
			q.mu.Unlock()
			continue
		}
		if q.closed.Load() {
			q.mu.Unlock()
			return dst, false
		}
		q.sleeping = true
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-wake:
			return q.Poll(dst), true
		}
	}
}
