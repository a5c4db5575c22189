package netio

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/ackcore"
)

func (c *Client) failLocal(inits []initRec, reason ackcore.Reason) {
	c.fail(inits, reason, &c.local, true)
}

// fail reports roots in flight as failed with reason, counted in oc.
// With !wait it does not wait for room in their inboxes (a writer, which
// their consumer may be waiting on, fails so): an inbox then holds more
// than its bound, by at most the roots in flight.
func (c *Client) fail(inits []initRec, reason ackcore.Reason, oc *outCounts, wait bool) {
	if len(inits) == 0 {
		return
	}
	now := time.Since(c.epoch)
	outs := make([]ackcore.Outcome, len(inits))
	for i, r := range inits {
		outs[i] = ackcore.Outcome{Root: r.root, Task: r.task, Kind: ackcore.Failed, Reason: reason}
		if r.ms != 0 {
			outs[i].Latency = now - time.Duration(r.ms)*time.Millisecond
		}
	}
	c.deliverWait(outs, oc, wait)
}

// deliver hands outcomes of roots in flight to their inboxes and counts
// them in oc.
func (c *Client) deliver(outs []ackcore.Outcome, oc *outCounts) { c.deliverWait(outs, oc, true) }

// deliverWait is deliver that, with !wait, does not wait for room in the
// inboxes.
func (c *Client) deliverWait(outs []ackcore.Outcome, oc *outCounts, wait bool) {
	var done, expl, to, full, stop, lost uint64
	for i := range outs {
		o := &outs[i]
		if o.Kind == ackcore.Completed {
			done++
			continue
		}
		switch o.Reason {
		case ackcore.ReasonExplicit:
			expl++
		case ackcore.ReasonTimeout:
			to++
		case ackcore.ReasonFull:
			full++
		case ackcore.ReasonStopped:
			stop++
		case ackcore.ReasonLost:
			lost++
		}
	}
	c.release(len(outs))
	for _, a := range [...]struct {
		n uint64
		c *atomic.Uint64
	}{{done, &oc.completed}, {expl, &oc.explicit}, {to, &oc.timeout}, {full, &oc.full}, {stop, &oc.stopped}, {lost, &oc.lost}} {
		if a.n > 0 {
			a.c.Add(a.n)
		}
	}
	if len(c.inbox) == 1 {
		c.inbox[0].put(outs, wait)
		return
	}
	// Group by inbox; a batch usually has few.
	for len(outs) > 0 {
		r := c.recvOf[outs[0].Task]
		ib := c.inbox[r]
		k := 0
		rest := outs[:0:0]
		for _, o := range outs {
			if c.recvOf[o.Task] == r {
				outs[k] = o
				k++
			} else {
				rest = append(rest, o)
			}
		}
		ib.put(outs[:k], wait)
		outs = rest
	}
}

// Receiver is one outcome inbox (acker.Inbox). Hosts' readers put into it;
// one goroutine takes from it. It holds at most MaxPending outcomes (a
// reader waits for room), more only for a batch that came at once, or
// once Stop began (then at most the roots still in flight, each failed
// once). A put
// wakes the consumer only when it waits (sleeping), so a consumer that
// polls costs the readers no channel operation.
type Receiver struct {
	c        *Client
	n        atomic.Int64 // len(q), read without the lock by Poll
	mu       sync.Mutex
	cond     *sync.Cond        // readers waiting for room
	q        []ackcore.Outcome // guarded by mu
	max      int
	waits    int         // guarded by mu: goroutines waiting on cond
	sleeping bool        // guarded by mu: the consumer waits on wake
	closed   atomic.Bool // Stop ended: nothing more is put
	wake     chan struct{}
}

func (ib *Receiver) put(outs []ackcore.Outcome, wait bool) {
	ib.mu.Lock()
	for wait && len(ib.q) >= ib.max && !ib.c.closed.Load() { // once Stop began, puts never wait
		ib.waits++
		ib.cond.Wait()
		ib.waits--
	}
	ib.q = append(ib.q, outs...)
	ib.n.Store(int64(len(ib.q)))
	wake := ib.sleeping
	ib.sleeping = false
	ib.mu.Unlock()
	if wake {
		ib.signal()
	}
}

func (ib *Receiver) signal() {
	select {
	case ib.wake <- struct{}{}:
	default:
	}
}

// stopping wakes the readers waiting for room: Stop began (the client is
// closed), so puts no longer wait, and Stop never waits on a consumer
// that stopped reading.
func (ib *Receiver) stopping() {
	ib.mu.Lock()
	ib.cond.Broadcast()
	ib.mu.Unlock()
}

// close marks the end of the outcomes: Wait returns false once the
// consumer took what is left.
func (ib *Receiver) close() {
	ib.mu.Lock()
	ib.closed.Store(true)
	ib.mu.Unlock()
	ib.signal()
}

// Poll appends the outcomes available now to dst, without waiting.
func (ib *Receiver) Poll(dst []ackcore.Outcome) []ackcore.Outcome {
	if ib.n.Load() == 0 {
		return dst
	}
	ib.mu.Lock()
	dst = append(dst, ib.q...)
	ib.q = ib.q[:0]
	ib.n.Store(0)
	if ib.waits > 0 {
		ib.cond.Broadcast()
	}
	ib.mu.Unlock()
	return dst
}

// Wait appends at least one outcome to dst, waiting for it; ok is false
// once the client has stopped and every outcome was taken.
func (ib *Receiver) Wait(dst []ackcore.Outcome) ([]ackcore.Outcome, bool) {
	return ib.WaitUntil(dst, nil)
}

// WaitUntil is Wait that also returns, with what it has (possibly
// nothing), when wake fires.
func (ib *Receiver) WaitUntil(dst []ackcore.Outcome, wake <-chan time.Time) ([]ackcore.Outcome, bool) {
	for {
		n := len(dst)
		if dst = ib.Poll(dst); len(dst) > n {
			return dst, true
		}
		ib.mu.Lock()
		if len(ib.q) > 0 {
			ib.mu.Unlock()
			continue
		}
		if ib.closed.Load() {
			ib.mu.Unlock()
			return dst, false
		}
		ib.sleeping = true
		ib.mu.Unlock()
		select {
		case <-ib.wake:
		case <-wake:
			return ib.Poll(dst), true
		}
	}
}
