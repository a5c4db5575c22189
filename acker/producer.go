package acker

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/invariants"
	"github.com/xorack/xorack/ring"
)

// ErrNotStarted is returned by a producer's Send, TrySend and SendBatch
// before Start: nothing would take the message, and a Send would
// eventually wait for a ring that never drains.
var ErrNotStarted = errors.New("acker: send before Start (call Acker.Start first)")

// Producer sends messages to the shards. It stages messages in place in
// each shard's ring and publishes a shard's staged span when it fills
// (Batch messages) or on Flush: one compare-and-swap per span, not per message.
// Not safe for concurrent use: one goroutine per Producer.
type Producer struct {
	rings  []*ring.SPSC[ackcore.Msg] // rings[s]: this producer's ring into shard s
	spans  [][]ackcore.Msg           // reserved, partly filled span per shard
	fill   []int                     // messages staged in spans[s]
	done   []uint64                  // messages published into shard s (committed before the seal)
	gates  []*gate                   // gates[s]: shard s's hold-back flags
	recvOf []uint32                  // task -> receiver, shared and immutable
	route  router
	tasks  uint32
	batch  int
	idle   ring.Idle
	lost   int // staged messages found unpublishable (rings closed), not yet reported by Flush
	id     int
	// started: this producer has seen running set (Start ran); running
	// is the Acker's, set once by Start.
	started bool
	running *atomic.Bool

	// open[s] is done[s]+1 as of the producer's last span reserved in
	// shard s: written by the producer once per span (not per message).
	// Stop finds the span unpublished when shard s applied exactly
	// open[s]-1 of this producer's messages, counts its staged messages
	// (stagedNow) and swaps in counted|c; the producer, on finding the
	// ring sealed, swaps in 0 and reports only the messages Stop did not
	// count (retire). A span still open after Stop holds what a racing
	// send staged past Stop's count: NotApplied adds those (unseen).
	open []atomic.Uint64

	// unapplied counts the messages this producer's sends accepted that
	// were never applied: Stop's count (StopError) plus what its calls
	// reported after (NotAppliedError). Written on those slow paths only;
	// Acker.NotApplied reads it.
	unapplied atomic.Uint64
}

// counted marks an open[s] that Stop counted: its low bits are how many
// of the span's staged messages Stop reported.
const counted = 1 << 63

// unpublished reports whether the span marked o (an uncounted, nonzero
// open[s]) was never published: e, shard s's executor, applied exactly
// the o-1 messages the producer had published into s when it reserved
// the span. Meaningful once Stop made the shards' applied counts final.
func (p *Producer) unpublished(o uint64, e *executor) bool { return o-1 == e.applied[p.id] }

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
// before waiting for outcomes, and before Stop (Stop counts the messages a
// producer left staged, which are not applied: StopError, Acker.NotApplied).
// Send returns ErrNotStarted before Start, ErrClosed once the
// acker stops, and, sending nothing, an error naming the value for a
// malformed message (ackcore.Msg.Validate: root 0, an unknown kind, a task
// or timeout out of range) or an INIT whose task the acker does not have.
func (p *Producer) Send(m ackcore.Msg) error {
	_, err := p.stage(m, true)
	return err
}

// SendBatch is Send for each of msgs in order. It checks every message
// first and stages nothing if one is malformed or names a task out of
// range (the error names its index and value); with one shard and no
// receiver held back it copies runs of messages into the ring span at
// once.
func (p *Producer) SendBatch(msgs []ackcore.Msg) error {
	for i := range msgs {
		if !p.valid(&msgs[i]) {
			return p.refuse(i, &msgs[i])
		}
	}
	if !p.started {
		if err := p.start(0); err != nil {
			return err
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
			if !p.commit(0) || !p.reserve(0, true) {
				return p.closedErr()
			}
		}
		n := copy(p.spans[0][p.fill[0]:], msgs)
		p.fill[0] += n
		msgs = msgs[n:]
	}
	return nil
}

// Room is for a caller that decodes messages straight into the ring (a
// network server): it returns at least n free places of this producer's
// span in the shard's ring, reserving a new span (publishing the staged
// one first, waiting for room as Send does) when the current one has
// fewer. The caller writes messages into a prefix of it and calls Staged
// with how many, which stages them as SendBatch would, without SendBatch's
// check and copy. Room returns nil when it cannot offer n places in one
// span, and the caller then decodes elsewhere and calls SendBatch: an
// acker of several shards (each message goes to its root's shard), a
// receiver held back (each INIT is looked at), n above the ring's size,
// or free places that wrap past the ring's end. With one shard and n of
// at least 1 it returns SendBatch's errors before Start and once the
// acker stops; otherwise nil, and SendBatch, which the caller then calls,
// returns them.
//
// The messages written must be valid, as SendBatch would find them
// (ackcore.Msg.Valid, an INIT's task below Spec.Tasks): Staged does not
// check them (a build with the invariants tag does, and panics). The
// places are the ring's and valid only until the producer's next call.
func (p *Producer) Room(n int) ([]ackcore.Msg, error) {
	if p.route.n > 1 || n < 1 {
		return nil, nil
	}
	if !p.started {
		if err := p.start(0); err != nil {
			return nil, err
		}
	}
	r := p.rings[0]
	if r.Closed() {
		return nil, p.closedErr()
	}
	if p.gates[0].n.Load() != 0 || n > r.Cap() {
		return nil, nil
	}
	if len(p.spans[0])-p.fill[0] < n {
		if !p.commit(0) || !p.reserveN(0, max(n, p.batch), true) {
			return nil, p.closedErr()
		}
		if len(p.spans[0]) < n {
			return nil, nil
		}
	}
	return p.spans[0][p.fill[0]:], nil
}

// Staged stages the first n messages the caller wrote into what Room
// returned last, as SendBatch stages them: published when the span is
// committed (a later Room that needs a new span, a send that fills it,
// Flush).
func (p *Producer) Staged(n int) {
	s := p.spans[0][p.fill[0] : p.fill[0]+n]
	if invariants.Enabled {
		for i := range s {
			if !p.valid(&s[i]) {
				panic(fmt.Sprintf("acker: producer %d: Staged message %d: %v", p.id, i, p.refuse(i, &s[i])))
			}
		}
	}
	p.fill[0] += len(s)
}

// stageAll stages each of msgs with Send's waits.
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
// returns Send's errors (before Start, after Stop, a malformed message).
func (p *Producer) TrySend(m ackcore.Msg) (bool, error) { return p.stage(m, false) }

// valid is the producer's check of m at the call: ackcore's rule
// (Msg.Valid), then an INIT's task against the acker's tasks. Small
// enough to inline into every send; refuse builds the error out of line.
func (p *Producer) valid(m *ackcore.Msg) bool {
	return m.Valid() && (m.Kind != ackcore.Init || m.Task < p.tasks)
}

// refuse is the error of a message valid refused, naming the producer,
// the message's index in a SendBatch (i >= 0) and the value.
func (p *Producer) refuse(i int, m *ackcore.Msg) error {
	err := m.Validate()
	if err == nil {
		err = fmt.Errorf("INIT root %#x names task %d, acker has %d tasks", m.Root, m.Task, p.tasks)
	}
	if i >= 0 {
		return fmt.Errorf("acker: producer %d: message %d: %w", p.id, i, err)
	}
	return fmt.Errorf("acker: producer %d: %w", p.id, err)
}

// start is the first send's look at whether Start ran (then never again):
// ErrClosed once shard s's ring is sealed (Stop, even before Start),
// ErrNotStarted before Start.
func (p *Producer) start(s uint64) error {
	if p.rings[s].Closed() {
		return p.closedErr()
	}
	if !p.running.Load() {
		return ErrNotStarted
	}
	p.started = true
	return nil
}

// stage checks m and puts it in its shard's span, reserving a new span
// (waiting for room if wait) when the current one is full, after
// publishing it.
func (p *Producer) stage(m ackcore.Msg, wait bool) (bool, error) {
	if !p.valid(&m) {
		return false, p.refuse(-1, &m)
	}
	s := uint64(0)
	if p.route.n > 1 {
		s = p.route.shard(m.Root)
	}
	if !p.started {
		if err := p.start(s); err != nil {
			return false, err
		}
	}
	r := p.rings[s]
	if m.Kind == ackcore.Init {
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
		if !p.commit(int(s)) { // sealed since the check above
			return false, p.closedErr()
		}
		if !p.reserve(int(s), wait) {
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

// commit publishes shard s's staged span, counting it in done[s], and
// ends the span. It reports false when Stop sealed the ring first: then
// the span's messages Stop did not count are added to lost.
func (p *Producer) commit(s int) bool {
	ok := true
	if n := p.fill[s]; n > 0 {
		if p.rings[s].Commit(n) { // the ring's seal: false when closed before this publish
			p.done[s] += uint64(n)
		} else {
			c := p.retire(s)
			if invariants.Enabled && c > n {
				panic(fmt.Sprintf("acker: producer %d: Stop counted %d staged messages in shard %d, %d were staged", p.id, c, s, n))
			}
			p.lost += n - c
			ok = false
		}
	}
	p.spans[s] = nil // a Commit ends the reservation; the next stage reserves anew
	p.fill[s] = 0
	return ok
}

// retire takes shard s's span back from Stop once its ring is found
// sealed, and returns how many of its messages Stop already counted (0
// when Stop has not looked, or found nothing staged): those are reported,
// and the producer reports only the rest. After the swap Stop no longer
// counts the span.
func (p *Producer) retire(s int) int {
	if o := p.open[s].Swap(0); o&counted != 0 {
		return int(o &^ counted)
	}
	return 0
}

// stagedNow is Stop's read of how many messages the producer has staged
// in shard s, from Stop's goroutine: a word the producer writes with
// every message, read once, after Stop found the span open and
// unpublished (open[s] read as that span's mark, so the read sees this
// span's count: the mark's store follows the reset of the last span's).
// Making it readable by the producer's own rules would cost every send
// an atomic store, so it is a plain read of a word, which in Go sees one
// whole value the producer wrote, and the race detector is told not to
// look (go:norace). What it returns is exact when the producer is not in
// a call; a call that overlaps Stop may stage more after the read. Those
// are reported once either way: by the producer's next call, when it
// finds the ring sealed (retire returns what Stop counted), or, while it
// makes none, by NotApplied, which reads the fill again (unseen) once
// the producer is quiet.
//
//go:norace
func (p *Producer) stagedNow(s int) int { return p.fill[s] }

// unseen is, once Stop counted (the shards' applied counts final), how
// many messages the producer has staged in spans Stop found unpublished
// beyond what Stop counted in them, that no call of the producer reported
// since: a send that overlapped Stop staged them after Stop read its
// count (or after it read 0 and left the span unmarked) and returned nil.
// A span the producer retired counts 0: its call reported what Stop did
// not count. NotApplied adds it to unapplied, which it loads first: a
// retire swaps open[s] out before its call adds to unapplied, so a sum
// that sees the add sees the span retired, and nothing counts twice. It
// reads the producer's fill as Stop does (stagedNow): exact once the
// producer's last call happens before it, possibly less during a call.
func (p *Producer) unseen(execs []*executor) uint64 {
	var n uint64
	for s := range p.open {
		o := p.open[s].Load()
		var c uint64 // what Stop counted in the span
		switch {
		case o == 0:
			continue // no span, or retired
		case o&counted != 0:
			c = o &^ counted
		case !p.unpublished(o, execs[s]):
			continue // published since the mark
		}
		if f := uint64(p.stagedNow(s)); f > c {
			n += f - c
		}
	}
	return n
}

// reserve reserves a new span in shard s (waiting for room if wait) and
// reports whether it got one. Once per span, not per message, it tells
// Stop that a span is open (open[s]), and only then looks whether the
// ring is sealed: a span reserved while that look says open is seen by
// Stop (which seals, then reads open), so what a producer stages in it
// and never publishes is counted. One found sealed is given up, and open
// retracted: nothing is staged in it yet, so Stop, counting nothing, left
// the mark in place.
func (p *Producer) reserve(s int, wait bool) bool { return p.reserveN(s, p.batch, wait) }

// reserveN is reserve of a span of up to n places.
func (p *Producer) reserveN(s, n int, wait bool) bool {
	r := p.rings[s]
	var span []ackcore.Msg
	if wait {
		span = r.ReserveWait(n)
	} else {
		span = r.Reserve(n)
	}
	if len(span) == 0 {
		return false
	}
	mark := p.done[s] + 1
	p.open[s].Store(mark)
	if r.Closed() && p.open[s].CompareAndSwap(mark, 0) {
		return false
	}
	p.spans[s] = span
	return true
}

// awaitGate waits until g no longer holds back receiver rc, after
// publishing everything staged (so nothing of this producer's waits behind
// the hold). It reports false once the acker stops.
func (p *Producer) awaitGate(g *gate, rc uint32, r *ring.SPSC[ackcore.Msg]) bool {
	if !p.publish() {
		return false
	}
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
// p.lost the staged messages it could not publish (their ring sealed)
// that Stop did not count; it reports false when there were any such.
func (p *Producer) publish() bool {
	ok := true
	for s, n := range p.fill {
		if n > 0 && !p.commit(s) {
			ok = false
		}
	}
	return ok
}

// closedErr is the error of a call that found the acker stopped: it ends
// every staged span first (publish), then returns ErrClosed, with the
// count of accepted messages not applied that Stop did not count, if any
// (reported now, and counted in unapplied).
func (p *Producer) closedErr() error {
	p.publish()
	if lost := p.lost; lost > 0 {
		p.lost = 0
		p.unapplied.Add(uint64(lost))
		return &NotAppliedError{N: lost}
	}
	return ErrClosed
}

// NotAppliedError is the error of a producer call that found the acker
// stopped with messages it had accepted staged and never published, that
// Stop did not count: a call that overlapped Stop, staging after Stop
// counted or publishing as Stop sealed the rings. Those N were not
// applied and get no outcome; Stop counts the rest (StopError.Unflushed),
// so each such message is reported once, by one or the other, and
// Acker.NotApplied counts both (and, before this call, already counted
// the N, as staged past Stop's count). It is ErrClosed for errors.Is.
type NotAppliedError struct{ N int }

func (e *NotAppliedError) Error() string {
	return fmt.Sprintf("%v: %d staged messages not applied", ErrClosed, e.N)
}

// Unwrap makes errors.Is(err, ErrClosed) hold.
func (e *NotAppliedError) Unwrap() error { return ErrClosed }

// Flush publishes every staged message. A message is applied exactly when
// its publish landed before Stop sealed the rings (the executors drain
// them to empty after the seal). Those staged but not published then are
// not applied: Flush returns ErrClosed, a NotAppliedError with their count
// for those Stop did not already count, so none is lost without a word.
// The same count rides on the ErrClosed of a Send, SendBatch or TrySend
// that finds the acker stopped.
func (p *Producer) Flush() error {
	if !p.publish() || p.lost > 0 {
		return p.closedErr()
	}
	return nil
}
