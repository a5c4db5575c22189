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
	// for the inboxes to take those outcomes (*Acker does; a remote
	// acker's client need not), so call it from a goroutine other than
	// their readers; either way an inbox's Wait says ok=false only once
	// its last outcome was taken. It returns the final counters.
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

// ReceiverTable maps each task in [0, Tasks) to its inbox, calling
// ReceiverOf once per task (nil: task mod Receivers; Receivers 0: Tasks),
// with an error naming a task mapped out of range.
func (s Spec) ReceiverTable() ([]uint32, error) {
	n := s.Receivers
	if n == 0 {
		n = s.Tasks
	}
	if s.Tasks < 1 || n < 1 {
		return nil, fmt.Errorf("acker: Spec with %d tasks and %d receivers", s.Tasks, s.Receivers)
	}
	of := make([]uint32, s.Tasks)
	for t := range of {
		r := t % n
		if s.ReceiverOf != nil {
			r = s.ReceiverOf(t)
		}
		if r < 0 || r >= n {
			return nil, fmt.Errorf("acker: ReceiverOf(%d) = %d, out of range [0, Receivers %d)", t, r, n)
		}
		of[t] = uint32(r)
	}
	return of, nil
}

// Sender returns producer i as a Sender (Port).
func (a *Acker) Sender(i int) Sender { return a.Producer(i) }

// Inbox returns receiver r as an Inbox (Port).
func (a *Acker) Inbox(r int) Inbox { return a.Receiver(r) }

var (
	_ Port   = (*Acker)(nil)
	_ Sender = (*Producer)(nil)
	_ Inbox  = (*Receiver)(nil)
)
