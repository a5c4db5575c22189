package netio

import (
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/outq"
)

// failLocal reports roots in flight as failed with reason, straight to
// their inboxes (their slots are already taken).
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

// receiver is one outcome inbox (acker.Inbox): an outq.Queue of at most
// MaxPending outcomes. Hosts' readers put into it (a reader waits for
// room), more only for a batch that came at once, or once Stop began
// (then at most the roots still in flight, each failed once); one
// goroutine takes from it. A put wakes the consumer only when it waits,
// so a consumer that polls costs the readers no channel operation.
type receiver struct {
	q *outq.Queue[ackcore.Outcome]
}

func (ib *receiver) put(outs []ackcore.Outcome, wait bool) { ib.q.Put(outs, wait) }

// stopping wakes the readers waiting for room: Stop began (the client is
// closed), so puts no longer wait, and Stop never waits on a consumer
// that stopped reading.
func (ib *receiver) stopping() { ib.q.Stopping() }

// close marks the end of the outcomes: Wait returns false once the
// consumer took what is left.
func (ib *receiver) close() { ib.q.Close() }

// Poll appends the outcomes available now to dst, without waiting.
func (ib *receiver) Poll(dst []ackcore.Outcome) []ackcore.Outcome { return ib.q.Poll(dst) }

// Wait appends at least one outcome to dst, waiting for it; ok is false
// once the client has stopped and every outcome was taken.
func (ib *receiver) Wait(dst []ackcore.Outcome) ([]ackcore.Outcome, bool) { return ib.q.Wait(dst) }

// WaitUntil is Wait that also returns, with what it has (possibly
// nothing), when wake fires.
func (ib *receiver) WaitUntil(dst []ackcore.Outcome, wake <-chan time.Time) ([]ackcore.Outcome, bool) {
	return ib.q.WaitUntil(dst, wake)
}
