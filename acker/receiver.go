package acker

import (
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/layout"
	"github.com/xorack/xorack/ring"
)

// runBatch is the most outcomes Run takes from the rings at once: it
// copies them out, releases the ring slots, then calls its callback for
// each (so a panicking callback cannot make the rings deliver them again).
// 256 × 32 bytes = 8 KiB per receiver.
const runBatch = 256

// Receiver receives, from every shard, the outcomes of the roots of the
// spout tasks mapped to it (one task unless Config.Receivers groups them;
// ackcore.Outcome.Task says whose). One goroutine takes from it, with
// Poll, Wait, WaitUntil or Run; Stats may be called from any goroutine.
//
// Each outcome is delivered exactly once across all four, also when a Run
// callback panics: the outcome whose callback panicked counts as
// delivered, and the rest of its batch comes first from the next call of
// any of them.
type Receiver struct {
	in *ring.FanIn[ackcore.Outcome]
	a  *Acker
	id uint32

	// Owned by the goroutine that takes: Run's batch, buf[next:n] not yet
	// delivered.
	buf     []ackcore.Outcome
	next, n int
	_       [layout.CacheLine]byte

	// Written by the goroutine that takes, read by Stats.
	lastTake atomic.Int64  // ns since Acker.epoch of its last take
	taken    atomic.Uint64 // outcomes taken from the rings
	_        [layout.CacheLine - 16]byte

	// holders is the number of shards holding outcomes for this receiver
	// beyond its full rings: written by the executors when theirs becomes
	// non-empty or empty, read after each take.
	holders atomic.Int32
	_       [layout.CacheLine - 4]byte
}

// rest appends what a panicking Run callback left undelivered.
func (rc *Receiver) rest(dst []ackcore.Outcome) []ackcore.Outcome {
	if rc.next < rc.n {
		dst = append(dst, rc.buf[rc.next:rc.n]...)
		rc.next = rc.n
	}
	return dst
}

// took records that k outcomes were taken from the rings, and wakes the
// shards that hold more for this receiver: its rings have room now.
func (rc *Receiver) took(k int) {
	if k > 0 {
		rc.taken.Store(rc.taken.Load() + uint64(k))
		rc.lastTake.Store(int64(time.Since(rc.a.epoch)))
		if rc.holders.Load() != 0 {
			for _, e := range rc.a.execs {
				if e.heldN[rc.id].Load() != 0 {
					e.nudge()
				}
			}
		}
	}
}

// Poll appends the outcomes available now to dst, without waiting.
func (rc *Receiver) Poll(dst []ackcore.Outcome) []ackcore.Outcome {
	dst = rc.rest(dst)
	k := rc.in.Drain(func(_ int, items []ackcore.Outcome) { dst = append(dst, items...) })
	rc.took(k)
	return dst
}

// Wait appends at least one outcome to dst, waiting with the idle strategy;
// ok is false once the acker has stopped and every outcome was taken.
func (rc *Receiver) Wait(dst []ackcore.Outcome) (_ []ackcore.Outcome, ok bool) {
	if rc.next < rc.n {
		return rc.Poll(dst), true
	}
	k := rc.in.DrainWait(func(_ int, items []ackcore.Outcome) { dst = append(dst, items...) })
	rc.took(k)
	return dst, k > 0
}

// WaitUntil is Wait that also returns when wake fires, with whatever it
// has then (possibly nothing); ok is false once the acker has stopped and
// every outcome was taken.
func (rc *Receiver) WaitUntil(dst []ackcore.Outcome, wake <-chan time.Time) (_ []ackcore.Outcome, ok bool) {
	if rc.next < rc.n {
		return rc.Poll(dst), true
	}
	take := func(_ int, items []ackcore.Outcome) { dst = append(dst, items...) }
	k, _ := rc.in.DrainWaitUntil(take, wake)
	closed := k == 0 && rc.in.Closed()
	if closed {
		// Outcomes may have landed between the wait's last look and the
		// close: Closed comes after the executors' last push, so one
		// more drain takes them all.
		k = rc.in.Drain(take)
	}
	rc.took(k)
	return dst, k > 0 || !closed
}

// Run calls fn for each outcome until the acker has stopped and every
// outcome was delivered (the callback style). If fn panics, the panic
// propagates; that outcome counts as delivered, and the ones after it in
// Run's batch come first from the next Run, Poll, Wait or WaitUntil.
func (rc *Receiver) Run(fn func(ackcore.Outcome)) {
	if rc.buf == nil {
		rc.buf = make([]ackcore.Outcome, runBatch)
	}
	for {
		for rc.next < rc.n {
			o := rc.buf[rc.next]
			rc.next++ // before fn: a panic leaves it delivered
			fn(o)
		}
		k := rc.in.PopBatchWait(rc.buf)
		if k == 0 {
			return
		}
		rc.took(k)
		rc.next, rc.n = 0, k
	}
}

// ReceiverStats describes one receiver, so that an engine can name a spout
// that stopped taking its outcomes. The parts are read without stopping
// anything, each exact at some moment of the call.
type ReceiverStats struct {
	// Backlog is the outcomes waiting for the receiver: in its rings and
	// held by the shards (Held).
	Backlog int
	// Held is the part of Backlog the shards hold beyond its full rings.
	Held int
	// HeldBack is the number of shards holding back new INITs of its
	// tasks, each because it holds Config.Backlog outcomes for it.
	HeldBack int
	// Taken is the outcomes it has taken since New.
	Taken uint64
	// SinceTake is the time since it last took an outcome (since New if
	// never). With a Backlog, it says how long the receiver has left its
	// outcomes waiting, give or take the time they took to arrive.
	SinceTake time.Duration
	// Dropped is the outcomes Stop dropped because the receiver had not
	// taken them by its deadline (StopError names them too).
	Dropped int
}

// Stats describes the receiver; safe from any goroutine.
func (rc *Receiver) Stats() ReceiverStats {
	var st ReceiverStats
	for i, e := range rc.a.execs {
		h := int(e.heldN[rc.id].Load())
		st.Held += h
		st.Dropped += int(e.dropped[rc.id].Load())
		st.Backlog += h + rc.in.Producer(i).Len()
		if e.gate.held[rc.id].Load() != 0 {
			st.HeldBack++
		}
	}
	st.Taken = rc.taken.Load()
	st.SinceTake = time.Since(rc.a.epoch) - time.Duration(rc.lastTake.Load())
	return st
}
