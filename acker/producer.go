package acker

import (
	"fmt"
	"runtime"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/ring"
)

// Producer sends messages to the shards. It stages messages in place in
// each shard's ring and publishes a shard's staged span when it fills
// (Batch messages) or on Flush: one atomic store per span, not per message.
// Not safe for concurrent use: one goroutine per Producer.
type Producer struct {
	rings  []*ring.SPSC[ackcore.Msg] // rings[s]: this producer's ring into shard s
	spans  [][]ackcore.Msg           // reserved, partly filled span per shard
	fill   []int                     // messages staged in spans[s]
	gates  []*gate                   // gates[s]: shard s's hold-back flags
	recvOf []uint32                  // task -> receiver, shared and immutable
	route  router
	tasks  uint32
	batch  int
	idle   ring.Idle
	lost   int // staged messages found unpublishable (rings closed), not yet reported by Flush
}

// Send stages m for its shard. It waits (with the idle strategy) while
// that shard's ring is full, and, for an INIT, while that shard holds back
// the INITs of m.Task's receiver (it holds Backlog outcomes the receiver
// has not taken; see the package doc, "Bounded delivery"): backpressure,
// never loss. Before such a wait it publishes what it has staged.
//
// A goroutine that also polls a receiver must not wait in Send for an
// INIT of that receiver's tasks: nobody would take the outcomes that
// release it. It sends those with TrySend and polls while TrySend says
// no (see the package doc, "Concurrency").
//
// Staged messages are published when a span fills or on Flush; call Flush
// before waiting for outcomes. Send returns ErrClosed once the acker
// stops, and an error naming the value for an INIT whose task the acker
// does not have; other malformed messages are refused by the shard
// (Refused{invalid}, counted).
func (p *Producer) Send(m ackcore.Msg) error {
	_, err := p.stage(m, true)
	return err
}

// SendBatch is Send for each of msgs in order. It checks every INIT's task
// first and stages nothing if one is out of range (the error names it);
// with one shard and no receiver held back it copies runs of messages into
// the ring span at once.
func (p *Producer) SendBatch(msgs []ackcore.Msg) error {
	for i := range msgs {
		if m := &msgs[i]; m.Kind == ackcore.Init && m.Task >= p.tasks {
			return fmt.Errorf("acker: message %d: INIT root %#x names task %d, acker has %d tasks", i, m.Root, m.Task, p.tasks)
		}
	}
	if p.route.n > 1 {
		return p.stageAll(msgs)
	}
	r, g := p.rings[0], p.gates[0]
	for len(msgs) > 0 {
		if r.Closed() {
			return p.closedErr()
		}
		if g.n.Load() != 0 {
			// A receiver is held back: look at each INIT. (A span copied
			// before the flag was seen is at most a ring's worth of
			// messages: Footprint.Held counts it.)
			return p.stageAll(msgs)
		}
		if p.fill[0] == len(p.spans[0]) {
			if p.fill[0] > 0 && !r.Commit(p.fill[0]) {
				p.lost += p.fill[0]
			}
			p.spans[0], p.fill[0] = r.ReserveWait(p.batch), 0
			if len(p.spans[0]) == 0 {
				return p.closedErr()
			}
		}
		n := copy(p.spans[0][p.fill[0]:], msgs)
		p.fill[0] += n
		msgs = msgs[n:]
	}
	return nil
}

func (p *Producer) stageAll(msgs []ackcore.Msg) error {
	for i := range msgs {
		if _, err := p.stage(msgs[i], true); err != nil {
			return err
		}
	}
	return nil
}

// TrySend is Send without waiting: false when m's shard ring is full, or m
// is an INIT whose receiver that shard holds back, with m not sent. It
// returns ErrClosed once the acker stops.
func (p *Producer) TrySend(m ackcore.Msg) (bool, error) { return p.stage(m, false) }

// stage puts m in its shard's span, reserving a new span (waiting for room
// if wait) when the current one is full, after publishing it.
func (p *Producer) stage(m ackcore.Msg, wait bool) (bool, error) {
	s := uint64(0)
	if p.route.n > 1 {
		s = p.route.shard(m.Root)
	}
	r := p.rings[s]
	if m.Kind == ackcore.Init {
		if m.Task >= p.tasks {
			return false, fmt.Errorf("acker: INIT root %#x names task %d, acker has %d tasks", m.Root, m.Task, p.tasks)
		}
		if g := p.gates[s]; g.n.Load() != 0 {
			if rc := p.recvOf[m.Task]; g.held[rc].Load() != 0 {
				if !wait {
					if r.Closed() {
						return false, p.closedErr()
					}
					return false, nil
				}
				if !p.awaitGate(g, rc, r) {
					return false, p.closedErr()
				}
			}
		}
	}
	if r.Closed() {
		return false, p.closedErr()
	}
	if p.fill[s] == len(p.spans[s]) {
		if p.fill[s] > 0 && !r.Commit(p.fill[s]) {
			p.lost += p.fill[s] // closed since the check above: refused, reported below
		}
		if wait {
			p.spans[s] = r.ReserveWait(p.batch)
		} else {
			p.spans[s] = r.Reserve(p.batch)
		}
		p.fill[s] = 0
		if len(p.spans[s]) == 0 {
			if wait || r.Closed() {
				return false, p.closedErr()
			}
			return false, nil
		}
	}
	p.spans[s][p.fill[s]] = m
	p.fill[s]++
	return true, nil
}

// awaitGate waits until g no longer holds back receiver rc, after
// publishing everything staged (so nothing of this producer's waits behind
// the hold). It reports false once the acker stops.
func (p *Producer) awaitGate(g *gate, rc uint32, r *ring.SPSC[ackcore.Msg]) bool {
	p.publish()
	for i := 0; ; i++ {
		if g.held[rc].Load() == 0 {
			return true
		}
		if r.Closed() {
			return false
		}
		switch {
		case i < p.idle.Spins:
		case i < p.idle.Spins+p.idle.Yields:
			runtime.Gosched()
		default:
			g.wait(rc)
		}
	}
}

// publish commits every staged span whose ring is open and counts in
// p.lost the staged messages it could not publish (their ring closed).
func (p *Producer) publish() {
	for s, n := range p.fill {
		if n > 0 {
			if !p.rings[s].Commit(n) { // the ring's seal: closed before this publish
				p.lost += n
			}
			p.spans[s] = nil // a Commit ends the reservation; Send reserves anew
			p.fill[s] = 0
		}
	}
}

// closedErr is the error of a send refused because the acker stopped:
// ErrClosed, with the count of earlier staged messages that were not
// applied either, if any (then reported, and no longer counted).
func (p *Producer) closedErr() error {
	if lost := p.lost; lost > 0 {
		p.lost = 0
		return &NotAppliedError{N: lost}
	}
	return ErrClosed
}

// NotAppliedError is the error of a producer call that found the acker
// stopped while earlier messages it had accepted were still staged: those
// N were not applied and will get no outcome. It is ErrClosed for
// errors.Is.
type NotAppliedError struct{ N int }

func (e *NotAppliedError) Error() string {
	return fmt.Sprintf("%v: %d staged messages not applied", ErrClosed, e.N)
}

// Unwrap makes errors.Is(err, ErrClosed) hold.
func (e *NotAppliedError) Unwrap() error { return ErrClosed }

// Flush publishes every staged message. A message is applied exactly when
// its publish landed before Stop sealed the rings (the executors drain
// them to empty after the seal); those staged but not published then are
// not applied, and Flush returns an error saying how many, so none is lost
// without a word. The same count rides on the ErrClosed of a Send,
// SendBatch or TrySend that finds the acker stopped.
func (p *Producer) Flush() error {
	p.publish()
	if p.lost > 0 {
		return p.closedErr()
	}
	return nil
}
