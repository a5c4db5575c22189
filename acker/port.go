package acker

import (
	"fmt"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// Port is what an engine needs from an acker, in process (*Acker) or
// across the network: a send handle per goroutine that emits or acks, an
// inbox per spout executor, and Stop.
type Port interface {
	// Sender returns send handle i, in [0, Spec.Producers); each belongs
	// to one goroutine.
	Sender(i int) Sender
	// Inbox returns outcome inbox r, in [0, Spec.Receivers); one goroutine
	// takes from it.
	Inbox(r int) Inbox
	// Stop stops the acker: sends fail from now on, and every root still
	// pending with an INIT is reported Failed to its inbox. Stop may wait
	// for the inboxes to take those outcomes (*Acker does, at most
	// Config.StopTimeout; a remote acker's client need not), so call it
	// from a goroutine other than their readers; either way an inbox's
	// Wait says ok=false only once its last outcome was taken. It returns
	// the final counters.
	Stop() ackcore.Stats
}

// Sender sends messages to an acker; see Producer. One goroutine uses it.
type Sender interface {
	// Send stages m, waiting while the acker cannot take it
	// (backpressure, never loss). An INIT may wait until its task's
	// inbox takes outcomes: a goroutine that reads that inbox itself
	// sends its INITs with TrySend and reads while TrySend says no.
	Send(m ackcore.Msg) error
	// SendBatch is Send for each of msgs in order.
	SendBatch(msgs []ackcore.Msg) error
	// TrySend is Send without waiting: false when m cannot be taken now.
	TrySend(m ackcore.Msg) (bool, error)
	// Flush publishes every staged message.
	Flush() error
}

// Inbox delivers outcomes to one spout executor; see Receiver. One
// goroutine uses it.
type Inbox interface {
	// Poll appends the outcomes available now to dst, without waiting.
	Poll(dst []ackcore.Outcome) []ackcore.Outcome
	// Wait appends at least one outcome to dst, waiting for it; ok is
	// false once the acker has stopped and every outcome was taken.
	Wait(dst []ackcore.Outcome) (_ []ackcore.Outcome, ok bool)
	// WaitUntil is Wait that also returns, with what it has (possibly
	// nothing), when wake fires.
	WaitUntil(dst []ackcore.Outcome, wake <-chan time.Time) (_ []ackcore.Outcome, ok bool)
}

// Spec is the shape of an acker as an engine sees it: how many goroutines
// send, which spout tasks there are, and which inbox takes each task's
// outcomes. A remote acker's client opens a Port for a Spec.
type Spec struct {
	Producers int
	Tasks     int
	// Receivers is the number of inboxes; 0 means Tasks (one per task).
	Receivers int
	// ReceiverOf maps a task to its inbox; nil means task mod Receivers.
	ReceiverOf func(task int) int
}

// InboxTable is the inbox of each task, the table a port routes outcomes
// by, with s itself checked and filled: the one validation of a port's
// shape, for an in-process acker (Config), a remote one's client (netio)
// and the benchmark pipes alike. Producers in [1, MaxProducers], Tasks in
// [1, MaxTask+1], Receivers in [1, Tasks] (0 means Tasks), and ReceiverOf
// mapping every task into range, called once per task. It returns s with
// its defaults filled and the table (entry t is task t's inbox), or an
// error naming the first value out of range.
func (s Spec) InboxTable() (Spec, []uint32, error) {
	if s.Receivers == 0 {
		s.Receivers = s.Tasks
	}
	switch {
	case s.Producers < 1 || s.Producers > MaxProducers:
		return s, nil, fmt.Errorf("acker: Producers %d out of range [1, %d]", s.Producers, MaxProducers)
	case s.Tasks < 1 || s.Tasks > ackcore.MaxTask+1:
		return s, nil, fmt.Errorf("acker: Tasks %d out of range [1, %d]", s.Tasks, ackcore.MaxTask+1)
	case s.Receivers < 1 || s.Receivers > s.Tasks:
		return s, nil, fmt.Errorf("acker: Receivers %d out of range [1, Tasks %d] (0: Tasks)", s.Receivers, s.Tasks)
	}
	of := make([]uint32, s.Tasks)
	for t := range of {
		r := t % s.Receivers
		if s.ReceiverOf != nil {
			r = s.ReceiverOf(t)
		}
		if r < 0 || r >= s.Receivers {
			return s, nil, fmt.Errorf("acker: ReceiverOf(%d) = %d, out of range [0, Receivers %d)", t, r, s.Receivers)
		}
		of[t] = uint32(r)
	}
	return s, of, nil
}

var (
	_ Port   = (*Acker)(nil)
	_ Sender = (*Producer)(nil)
	_ Inbox  = (*Receiver)(nil)
)
