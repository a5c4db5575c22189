package ackcore

import (
	"fmt"
	"time"
)

// Kind is the type of a message sent to the acker.
type Kind uint8

// The four messages of the acker protocol (docs/semantics.md, "Messages
// the acker receives"). The zero Kind is invalid so that a zeroed Msg is never
// mistaken for a real one.
const (
	// Init announces a root: Val is the XOR of the edge ids the spout
	// emitted for it, Task the spout task to report the outcome to.
	Init Kind = iota + 1
	// Ack XORs Val into the root's ack val.
	Ack
	// Fail marks the root failed (fail-fast).
	Fail
	// Reset restarts the root's timeout; a non-zero Timeout also sets the
	// root's timeout from now on.
	Reset
)

var kindNames = [...]string{Init: "INIT", Ack: "ACK", Fail: "FAIL", Reset: "RESET"}

func (k Kind) String() string { return enumName(kindNames[:], k, "Kind") }

// MaxTask is the largest spout task id a message may carry (about a
// million): the top 12 bits of an entry's 32-bit task word hold its flags
// and probe distance (see table.go).
const MaxTask = 1<<20 - 1

// NoTask is the Task of an outcome whose spout task is not known (a message
// refused before any INIT named one).
const NoTask = ^uint32(0)

// MaxTimeout is the longest per-root timeout a message may ask for.
const MaxTimeout = 24 * time.Hour

// Msg is one message to the acker. It is 32 bytes, pointer-free, so that two
// fit in a cache line and rings of them are never scanned by the GC.
//
//	+---------+---------+--------+------+-----+-----------+-----+
//	| Root    | Val     | Task   | Kind | pad | TimeoutMs | pad |
//	| 0..7    | 8..15   | 16..19 | 20   |     | 24..27    |     |
//	+---------+---------+--------+------+-----+-----------+-----+
type Msg struct {
	Root uint64 // the root id; never 0
	Val  uint64 // Init, Ack: the value XORed into the ack val
	Task uint32 // Init: the spout task (<= MaxTask)
	Kind Kind
	_    [3]byte
	// TimeoutMs, on Init or Reset, is the root's timeout in milliseconds;
	// 0 keeps the shard's default (or the root's earlier override).
	TimeoutMs uint32
	_         uint32
}

// Outcome kinds.
type OutcomeKind uint8

const (
	// Completed: the root's tree was fully processed.
	Completed OutcomeKind = iota + 1
	// Failed: the root failed; Reason says why. The spout replays it.
	Failed
	// Refused: a message was not applied (Reason Full or Invalid) and no
	// root outcome follows from it; Task is NoTask unless the message named
	// one. An INIT refused for lack of room is reported as Failed/Full
	// instead, so that its spout replays it.
	Refused
)

var outcomeKindNames = [...]string{Completed: "completed", Failed: "failed", Refused: "refused"}

func (k OutcomeKind) String() string { return enumName(outcomeKindNames[:], k, "OutcomeKind") }

// Reason says why a root failed or a message was refused. It is the one
// failure reason of the whole project: the shard, the in-process acker,
// the network acker (on the wire, as this byte) and the topology engine
// (topology.Failure.Reason, its metrics' reason label) all use it, and
// String is the name each of them prints.
type Reason uint8

const (
	ReasonNone     Reason = iota
	ReasonExplicit        // a FAIL for the root arrived (a bolt failed a tuple of its tree)
	ReasonTimeout         // the root's deadline passed
	ReasonFull            // the pending-root bound was reached
	ReasonInvalid         // the message was malformed (zero root, unknown kind, task or timeout out of range)
	ReasonStopped         // the acker (or the topology) stopped while the root was pending
	ReasonLost            // the acker holding the root was lost (a remote acker's connection or host)
	// ReasonPanic is set by the topology engine, never by an acker: a
	// bolt's Execute panicked on a tuple of the tree. It is the last
	// reason, and never travels on the wire.
	ReasonPanic
)

var reasonNames = [...]string{ReasonNone: "none", ReasonExplicit: "explicit", ReasonTimeout: "timeout", ReasonFull: "full",
	ReasonInvalid: "invalid", ReasonStopped: "stopped", ReasonLost: "lost", ReasonPanic: "panic"}

// String is the reason's name, one lower-case word: what logs, status
// pages and metric labels (reason="lost") print.
func (r Reason) String() string { return enumName(reasonNames[:], r, "Reason") }

// Outcome is what the acker reports: exactly one Completed or Failed per
// root that saw an INIT, plus a Refused for each message it could not apply.
// 32 bytes, pointer-free.
type Outcome struct {
	Root uint64
	// Latency is the time from INIT to completion (Completed) or to the
	// failure (Failed), with the resolution of the shard's tick.
	Latency time.Duration
	Task    uint32
	Kind    OutcomeKind
	Reason  Reason
	_       [10]byte
}

// fault is the first rule a message breaks, or faultNone.
type fault uint8

const (
	faultNone    fault = iota
	faultRoot          // root 0
	faultKind          // not one of the four kinds
	faultTask          // an INIT's task above MaxTask
	faultTimeout       // a timeout above MaxTimeout
)

// MaxTimeoutMs is the largest TimeoutMs a well-formed message carries:
// MaxTimeout in the unit of Msg.TimeoutMs.
const MaxTimeoutMs = uint32(MaxTimeout / time.Millisecond)

// fault is the one definition of a well-formed message: Valid, Validate,
// the shard and every baseline acker go through it.
func (m *Msg) fault() fault {
	switch {
	case m.Root == 0:
		return faultRoot
	case m.Kind-1 > Reset-1: // 0 or above Reset
		return faultKind
	case m.Kind == Init && m.Task > MaxTask:
		return faultTask
	case m.TimeoutMs > MaxTimeoutMs:
		return faultTimeout
	}
	return faultNone
}

// Valid reports whether m is well formed: Validate would return nil. It
// allocates nothing, for hot paths.
func (m *Msg) Valid() bool { return m.fault() == faultNone }

// Validate reports whether m is well formed, with an error naming the bad
// value. The shard applies the same checks (Valid) and answers a malformed
// message with InvalidOutcome instead of an error.
func (m *Msg) Validate() error {
	switch m.fault() {
	case faultRoot:
		return fmt.Errorf("ackcore: %v with root 0 (root ids are never 0)", m.Kind)
	case faultKind:
		return fmt.Errorf("ackcore: root %#x: unknown message kind %d", m.Root, uint8(m.Kind))
	case faultTask:
		return fmt.Errorf("ackcore: INIT root %#x: task %d exceeds MaxTask %d", m.Root, m.Task, MaxTask)
	case faultTimeout:
		return fmt.Errorf("ackcore: %v root %#x: timeout %d ms exceeds %v", m.Kind, m.Root, m.TimeoutMs, MaxTimeout)
	}
	return nil
}

// InvalidOutcome is the outcome every acker reports for a malformed m:
// Refused{invalid}, naming the task only when m is an INIT whose task is
// in range.
func (m *Msg) InvalidOutcome() Outcome {
	task := NoTask
	if m.Kind == Init && m.Task <= MaxTask {
		task = m.Task
	}
	return Outcome{Root: m.Root, Task: task, Kind: Refused, Reason: ReasonInvalid}
}

// Interface is the single-writer acker interface: Shard implements it, and
// so do the baselines it is measured against, so that tests and benchmarks
// drive them all the same way. One goroutine at a time may call its methods.
type Interface interface {
	// Apply applies msgs in order, appending their outcomes to out.
	Apply(msgs []Msg, out []Outcome) []Outcome
	// Expire appends the outcomes of roots whose deadline has passed, at
	// most cap(out)-len(out) of them; more is true if it ran out of room.
	Expire(out []Outcome) (_ []Outcome, more bool)
	// Stats returns exact counters.
	Stats() Stats
}

var _ Interface = (*Shard)(nil)

// enumName is the name of v in names (indexed by value), or, for a value
// with no name, the type's name and the number: what the String methods
// of the package's enums return.
func enumName[T ~uint8](names []string, v T, typ string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, uint8(v))
}
