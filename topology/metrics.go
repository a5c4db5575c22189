package topology

import (
	"reflect"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/numfield"
)

// counters are one executor's exact counters. The executor writes its own
// copy and publishes it (under a mutex) once a millisecond while busy, before
// it waits, and when it stops; Metrics adds up the published copies
// (numfield.Add: the high-water mark PendingHigh keeps the largest).
type counters struct {
	Emitted     uint64 // emit calls (spouts: first attempts and untracked emits)
	Transferred uint64 // tuples sent to tasks
	Dropped     uint64 // tuples dropped: lost in transit (fault injection) or at shutdown

	Executed     uint64 // bolts: Execute calls
	Acked        uint64 // bolts: inputs acked
	Failed       uint64 // bolts: inputs failed
	LateAcks     uint64 // bolts: acks of tuples whose root had already failed, timed out or stopped
	Resets       uint64 // bolts: RESETs sent
	ResetsCapped uint64 // bolts: RESETs not sent, the root's ResetCap reached
	AckerErrors  uint64 // messages the acker refused (it had stopped)
	Panics       uint64 // panics recovered from the component's code
	BusyNs       uint64 // bolts: ns executing batches of inputs (two clock reads a batch)

	Completed     uint64                          // spouts: roots completed (at most once: Acks right after emit)
	FailedBy      [ackcore.ReasonPanic + 1]uint64 // spouts: failed attempts by reason (failReason's)
	Replayed      uint64                          // spouts: replays emitted
	DeadLettered  uint64                          // spouts: messages that failed their last attempt
	FailedFinal   uint64                          // spouts: Fail callbacks (dead-lettered, stopped, or a Redeliverer's failed attempt)
	Stale         uint64                          // spouts: outcomes for roots not pending (none expected)
	BreakerOpens  uint64                          // spouts: times the breaker opened
	BreakerHeldNs uint64                          // spouts: ns the breaker was open or half open

	Pending     int64 // spouts: roots pending now: in flight, waiting for a retry, or held by the breaker
	Waiting     int64 // spouts: of those, roots waiting out a retry's backoff (not counted against Bound)
	Held        int64 // spouts: of those, new messages the breaker holds (emitted by Next, not started)
	PendingHigh int64 `numfield:"max"` // spouts: the most pending at once, per task
	Bound       int64 // spouts: the pending bound per task now
	BreakerOpen int64 // spouts: 1 while the breaker is open or probing
}

// Metrics are the topology's exact counters, per component. While it runs
// they are at most a millisecond old per executor (a busy executor
// publishes once a millisecond, an idle one before it waits); after Stop
// they are final.
type Metrics struct {
	Components []ComponentMetrics // in topological order
	// Acker is the acker's own counters while it runs, when its port has
	// a Stats method whose first result is ackcore.Stats (the in-process
	// acker's and the network acker's client's have); after Stop,
	// Port.Stop's final counters.
	Acker *ackcore.Stats
}

// Component returns the named component's metrics, or nil.
func (m Metrics) Component(name string) *ComponentMetrics {
	for i := range m.Components {
		if m.Components[i].Name == name {
			return &m.Components[i]
		}
	}
	return nil
}

// ComponentMetrics are one component's counters, summed over its tasks.
type ComponentMetrics struct {
	Name      string
	Spout     bool
	Executors int
	Tasks     int

	Emitted     uint64 // emit calls (spouts: first attempts and untracked emits)
	Transferred uint64 // tuples sent to tasks (one per destination task)
	Dropped     uint64 // tuples lost in transit (fault injection) or dropped at shutdown

	// Bolts.
	Executed     uint64
	Acked        uint64
	Failed       uint64
	LateAcks     uint64 // acks that came after their root had failed, timed out or stopped
	Resets       uint64
	ResetsCapped uint64 // RESETs refused: the root had reached Config.ResetCap
	AckerErrors  uint64
	// Panics recovered from the component's code (any method, spouts
	// and bolts).
	Panics uint64
	// TimeoutsHeld counts the traced roots (Config.TraceEvery) that
	// timed out while one of the component's tasks held, or was about to
	// receive, one of their unacked tuples (Failure.Held names them):
	// about one in TraceEvery of the timeouts it caused.
	TimeoutsHeld uint64

	// Spouts: the outcomes of their roots. The failed attempts are
	// counted by their ackcore.Reason (FailedWith takes one).
	Completed      uint64
	FailedExplicit uint64
	FailedTimeout  uint64
	FailedFull     uint64 // the acker was full and refused the root
	FailedStopped  uint64
	FailedLost     uint64 // the acker holding the root was lost
	FailedPanic    uint64
	Replayed       uint64 // replays emitted (each a fresh root)
	DeadLettered   uint64 // messages that failed their last attempt
	FailedFinal    uint64 // Fail callbacks: dead-lettered, given up at shutdown, or a Redeliverer's failed attempts
	Stale          uint64 // outcomes for roots that were not pending
	BreakerOpens   uint64
	BreakerOpen    int // executors whose breaker is open or probing now
	// BreakerHeld is the time the executors' breakers were open or half
	// open (summed over executors): what the breaker cost the spout at
	// most.
	BreakerHeld time.Duration
	Pending     int // roots pending now (in flight, waiting for a retry, or held by the breaker)
	Waiting     int // of those, roots waiting out a retry's backoff: the bound counts the others
	Held        int // of those, new messages the breaker holds: emitted by Next, not started yet
	PendingHigh int // the most roots one task had pending at once
	Bound       int // the pending bound per task now, summed over executors
	// Latency is the complete latency of completed roots (emit to
	// completion, per attempt), in microseconds; nil for bolts.
	Latency *hdrhistogram.Histogram
	// ExecuteLatency is the bolt's Execute time in nanoseconds, one
	// Execute in ExecSampleEvery timed, on the engine clock; nil for
	// spouts. Busy is the time its executors spent executing batches of
	// inputs, measured per batch on the engine clock (never more than the
	// clock's time per executor): Busy over wall time and Executors is
	// the capacity Storm's UI shows.
	ExecuteLatency *hdrhistogram.Histogram
	Busy           time.Duration
}

// FailedWith returns the failed attempts with reason r.
// 0 for a reason no attempt fails with (none, invalid).
func (c *ComponentMetrics) FailedWith(r ackcore.Reason) uint64 {
	if p := c.failed(r); p != nil {
		return *p
	}
	return 0
}

// failed is the field counting the attempts failed with reason r; nil
// for a reason no attempt fails with (none, invalid).
func (c *ComponentMetrics) failed(r ackcore.Reason) *uint64 {
	fields := [...]*uint64{
		ackcore.ReasonExplicit: &c.FailedExplicit, ackcore.ReasonTimeout: &c.FailedTimeout,
		ackcore.ReasonFull: &c.FailedFull, ackcore.ReasonStopped: &c.FailedStopped,
		ackcore.ReasonLost: &c.FailedLost, ackcore.ReasonPanic: &c.FailedPanic,
	}
	if int(r) < len(fields) {
		return fields[r]
	}
	return nil
}

// failReasons are the reasons an attempt fails with, in the order the
// status page lists them.
var failReasons = [...]ackcore.Reason{ackcore.ReasonExplicit, ackcore.ReasonTimeout, ackcore.ReasonFull,
	ackcore.ReasonStopped, ackcore.ReasonLost, ackcore.ReasonPanic}

func (c *ComponentMetrics) set(m *counters) {
	c.Emitted, c.Transferred, c.Dropped = m.Emitted, m.Transferred, m.Dropped
	c.Executed, c.Acked, c.Failed = m.Executed, m.Acked, m.Failed
	c.LateAcks, c.Resets, c.ResetsCapped, c.AckerErrors = m.LateAcks, m.Resets, m.ResetsCapped, m.AckerErrors
	c.Completed = m.Completed
	for _, r := range failReasons {
		*c.failed(r) = m.FailedBy[r]
	}
	c.Panics = m.Panics
	c.Busy = time.Duration(m.BusyNs)
	c.Replayed, c.DeadLettered, c.FailedFinal, c.Stale = m.Replayed, m.DeadLettered, m.FailedFinal, m.Stale
	c.BreakerOpens, c.BreakerOpen, c.BreakerHeld = m.BreakerOpens, int(m.BreakerOpen), time.Duration(m.BreakerHeldNs)
	c.Pending, c.Waiting, c.Held, c.PendingHigh, c.Bound = int(m.Pending), int(m.Waiting), int(m.Held), int(m.PendingHigh), int(m.Bound)
}

// Latency histogram range: 1 µs to one hour at 3 significant digits
// (latencies above an hour are recorded as an hour).
const (
	histMin    = 1
	histMax    = int64(time.Hour / time.Microsecond)
	histDigits = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histDigits) }

// Execute latency histogram range: 1 ns to 10 s at 2 significant digits
// (about 30 KB a histogram, two per bolt executor; an Execute over 10 s is
// recorded as 10 s).
const (
	execHistMin    = 1
	execHistMax    = int64(10 * time.Second)
	execHistDigits = 2
)

func newExecHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(execHistMin, execHistMax, execHistDigits)
}

func recordLatency(h *hdrhistogram.Histogram, d time.Duration) {
	_ = h.RecordValue(latencyUs(d)) // in range by construction
}

// latencyUs is d in microseconds, clamped to the latency histogram's range.
func latencyUs(d time.Duration) int64 {
	return min(max(int64(d/time.Microsecond), histMin), histMax)
}

// Metrics returns the topology's counters (see Metrics).
func (t *Topology) Metrics() Metrics {
	var m Metrics
	for _, c := range t.comps {
		cm := ComponentMetrics{Name: c.name, Spout: c.spout, Executors: c.nexec, Tasks: c.ntasks}
		var sum counters
		if c.spout {
			cm.Latency = newHist()
		} else {
			cm.ExecuteLatency = newExecHist()
		}
		for _, e := range c.execs {
			e.pub.Lock()
			numfield.Add(&sum, &e.pub.m)
			if s := t.spoutExecByID[e.id]; s != nil {
				cm.Latency.Merge(s.pubHist)
			} else if e.pubExecHist != nil {
				cm.ExecuteLatency.Merge(e.pubExecHist)
			}
			e.pub.Unlock()
		}
		cm.set(&sum)
		cm.TimeoutsHeld = c.timeoutsHeld.Load()
		m.Components = append(m.Components, cm)
	}
	if st, ok := t.AckerStats(); ok {
		m.Acker = &st
	}
	return m
}

// AckerStats returns Metrics().Acker alone: the acker's counters while
// the topology runs (where its port has them), the final ones after Stop;
// false where there are none. It reads no component's counters or
// histograms, so a monitor may poll it often (Metrics allocates and
// merges a latency histogram per component per call).
func (t *Topology) AckerStats() (ackcore.Stats, bool) {
	t.mu.Lock()
	if t.ackerFinal != nil {
		st := *t.ackerFinal
		t.mu.Unlock()
		return st, true
	}
	port := t.port
	t.mu.Unlock()
	if port == nil {
		return ackcore.Stats{}, false
	}
	return portStats(port)
}

var statsType = reflect.TypeFor[ackcore.Stats]()

// portStats reads a running port's counters: a Stats method returning
// ackcore.Stats, alone (the in-process acker's) or first of several (the
// network acker's client returns its own counters beside them).
func portStats(port acker.Port) (ackcore.Stats, bool) {
	if sp, ok := port.(interface{ Stats() ackcore.Stats }); ok {
		return sp.Stats(), true
	}
	meth := reflect.ValueOf(port).MethodByName("Stats")
	if !meth.IsValid() {
		return ackcore.Stats{}, false
	}
	if mt := meth.Type(); mt.NumIn() != 0 || mt.NumOut() == 0 || mt.Out(0) != statsType {
		return ackcore.Stats{}, false
	}
	return meth.Call(nil)[0].Interface().(ackcore.Stats), true
}
