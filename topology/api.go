package topology

import (
	"errors"
	"fmt"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// Spout is a source of tuples. Its task's executor calls Next repeatedly,
// while the task has room for more pending roots (Config.MaxSpoutPending;
// while the retry-storm breaker is open, room to hold one more new
// message: the breaker starts them later); Next emits zero or more tuples
// through c and returns. Ack and Fail report the final outcome of each
// tracked message (one emitted with a message id), once per message, on
// the executor's goroutine: Ack when its tree was fully processed, Fail
// when the engine gave up on it, after the last attempt of the retry
// policy (having called Config.DeadLetter) or at shutdown
// (ackcore.ReasonStopped). The engine replays failed attempts itself, with the values it
// kept, so a spout needs no replay cache (unless it is a Redeliverer,
// whose source replays: then Fail reports every failed attempt).
//
// A spout may also implement Opener (called before the first Next) and
// io.Closer (called after the last callback).
type Spout interface {
	Next(c *SpoutCollector)
	Ack(msgID any)
	Fail(msgID any, f *Failure)
}

// Redeliverer is implemented by a spout whose source redelivers failed
// messages itself: a broker with per-message acknowledgements and
// redelivery, such as NATS JetStream, where each failed attempt is handed
// back to the broker with a delay and comes back as the next delivery.
// The engine makes one attempt per tracked message such a spout emits:
//
//   - the attempt's number is Attempt(msgID), called once during the
//     emit (the broker's delivery count, from 1; below 1 counts as 1);
//     bolts see it as Tuple.Attempt and Failure.Attempts carries it;
//   - a failed attempt goes to Fail at once, whatever the retry policy
//     says: the engine neither replays it nor calls Config.DeadLetter.
//     The spout hands the message back to its source with the policy's
//     delay (TaskContext.Config().Retry, RetryPolicy.Delay) or, at the
//     policy's last attempt, dead-letters it, itself.
//
// Ack and ackcore.ReasonStopped keep their meaning: the tree completed, or the
// topology stopped with the message pending.
type Redeliverer interface {
	Spout
	Attempt(msgID any) int
}

// Bolt processes tuples. Execute is called once per input tuple on its
// task's executor goroutine; the bolt emits through c and must eventually
// Ack or Fail every input (or it times out). A bolt may also implement
// Opener and io.Closer.
type Bolt interface {
	Execute(t *Tuple, c *BoltCollector)
}

// BasicBolt is the simple bolt form: every emit through c is anchored to
// the input, the input is acked when Execute returns nil and failed with
// the error when it returns one. Wrap it with Basic to get a Bolt.
type BasicBolt interface {
	Execute(t *Tuple, c *BasicCollector) error
}

// BasicFunc is a BasicBolt made of a function.
type BasicFunc func(t *Tuple, c *BasicCollector) error

// Execute calls f.
func (f BasicFunc) Execute(t *Tuple, c *BasicCollector) error { return f(t, c) }

// Basic turns a BasicBolt into a Bolt that anchors every emit to the
// input, acks it when Execute returns nil and fails it with the error
// otherwise.
func Basic(b BasicBolt) Bolt { return &basicBolt{b: b} }

type basicBolt struct {
	b  BasicBolt
	bc BasicCollector
}

func (b *basicBolt) Execute(t *Tuple, c *BoltCollector) {
	b.bc = BasicCollector{c: c, in: t}
	if err := b.b.Execute(t, &b.bc); err != nil {
		c.Fail(t, err)
	} else {
		c.Ack(t)
	}
	b.bc.in = nil
}

func (b *basicBolt) Open(ctx TaskContext) error {
	if o, ok := b.b.(Opener); ok {
		return o.Open(ctx)
	}
	return nil
}

func (b *basicBolt) Close() error {
	if c, ok := b.b.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// Opener is implemented by spouts and bolts that need to set up before
// their first call (Storm's open and prepare).
type Opener interface {
	Open(ctx TaskContext) error
}

// TaskContext describes the task a spout or bolt instance runs as.
type TaskContext struct {
	Component string // the component's name
	Task      int    // the global task id (what EmitDirect takes)
	Index     int    // the task's index within its component
	topo      *Topology
}

// Config returns the topology's configuration, its zero fields filled
// with the defaults (the retry policy and the pending bound a spout that
// talks to a broker sizes itself by).
func (c TaskContext) Config() Config {
	if c.topo == nil {
		return Config{}
	}
	return c.topo.cfg
}

// ComponentTasks returns the global task ids of the named component, in
// order, or nil if there is no such component.
func (c TaskContext) ComponentTasks(name string) []int {
	if c.topo == nil {
		return nil
	}
	if comp, ok := c.topo.byName[name]; ok {
		return append([]int(nil), comp.tasks...)
	}
	return nil
}

// ErrFailed is Failure.Err for an explicit failure whose bolt gave no
// error (BoltCollector.Fail(t, nil)).
var ErrFailed = errors.New("topology: tuple failed")

// Failure describes why the engine gave up on a tracked message.
type Failure struct {
	// Reason is ackcore's: explicit, timeout, full (the acker was full
	// and refused the root), stopped, lost (the acker holding the root
	// was lost) or panic.
	Reason ackcore.Reason
	// Err is the bolt's error for a ReasonExplicit failure (ErrFailed
	// when it gave none, or when the error could not be carried), the
	// *PanicError for a ReasonPanic.
	Err error
	// Attempts is the number of attempts made, counting the first.
	Attempts int
	// Latency is the last attempt's time from emit to its failure.
	Latency time.Duration
	// Traced is set on a ReasonTimeout of a traced root (one in
	// Config.TraceEvery): Held then says where its unacked tuples were
	// when it timed out: the tasks executing one first, then the tuples
	// on their way to a task, then those lost, the longest-held first in
	// each. Traced with no Held
	// means every tuple of the tree was acked: an ACK was lost on the way
	// to the acker.
	Traced bool
	Held   []Held
}

func (f *Failure) Error() string {
	s := fmt.Sprintf("topology: message failed (%v) after %d attempt", f.Reason, f.Attempts)
	if f.Attempts != 1 {
		s += "s"
	}
	if f.Err != nil {
		s += ": " + f.Err.Error()
	}
	switch {
	case f.Traced && len(f.Held) > 0:
		s += ": held by " + heldString(f.Held)
	case f.Traced:
		s += ": every tuple acked (an ACK did not reach the acker)"
	}
	return s
}

// Unwrap returns the bolt's error.
func (f *Failure) Unwrap() error { return f.Err }

// DeadLetter is what Config.DeadLetter receives for a message that failed
// its last attempt: the values the engine kept, the last reason and the
// attempts made.
type DeadLetter struct {
	Component string
	Task      int
	Stream    string
	MsgID     any
	Values    []any
	Failure   Failure
}
