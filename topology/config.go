package topology

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/ring"
)

// Defaults for Config's zero fields.
const (
	// DefaultMessageTimeout is Storm's topology.message.timeout.secs.
	DefaultMessageTimeout = 30 * time.Second
	// DefaultMaxSpoutPending bounds each spout task's pending roots, and
	// with them the values the engine keeps for replays. Storm leaves its
	// setting unbounded by default; a bound is what keeps memory and
	// latency bounded, and 1024 roots per task keeps a pipeline of a few
	// executors busy while kept values stay small.
	DefaultMaxSpoutPending = 1024
	// DefaultRingSize is each executor-to-executor ring's capacity in
	// tuples.
	DefaultRingSize = 1024
	// DefaultBatch is the most tuples an executor takes from one input
	// ring per pass and stages per output ring before publishing it, and
	// the most Next calls a spout executor makes between polls of its
	// outcomes.
	DefaultBatch = 64
	// DefaultSpoutWait is how long a spout executor waits after a round in
	// which no task emitted anything (Storm's sleep spout wait strategy
	// waits 1 ms).
	DefaultSpoutWait = time.Millisecond
	// DefaultResetCap is ResetCap's default in message timeouts, as
	// Storm's RESET cap.
	DefaultResetCap = 10
	// DefaultMaxAttempts, DefaultBackoff, DefaultMaxBackoff and
	// DefaultJitter are RetryPolicy's defaults.
	DefaultMaxAttempts = 5
	DefaultBackoff     = 10 * time.Millisecond
	DefaultMaxBackoff  = 5 * time.Second
	DefaultJitter      = 0.5
	// The Breaker's defaults, once its FailureRate turns it on.
	DefaultBreakerWindow      = time.Second
	DefaultBreakerMinOutcomes = 20
	DefaultBreakerOpenFor     = 100 * time.Millisecond
	DefaultBreakerMaxOpenFor  = 10 * time.Second
	DefaultBreakerProbes      = 1
	// The Adaptive bound's defaults, once its TargetP99 turns it on.
	DefaultAdaptiveMin      = 1
	DefaultAdaptiveInterval = 100 * time.Millisecond
)

// Config configures a topology. Zero fields take the defaults: the zero
// Config is the default configuration, at least once with one in-process
// acker shard.
// At most once is only ever an explicit choice (AtMostOnce).
type Config struct {
	// AtMostOnce turns tracking off: there is no acker (Acker and Port
	// must be unset), nothing is tracked, and a spout's Ack is called
	// right after each emit with a message id. Storm's 0 ackers.
	AtMostOnce bool
	// Acker configures the in-process acker (acker.New), every field of
	// it: Shards (default acker.DefaultShards), ring sizes, Backlog, Batch, MaxBytes, Seed,
	// Idle (default: the engine's, Config.Idle), Pin (pins the shards
	// alone; Config.Pin pins them with the executors) and Shard, whose
	// MaxPending (per shard) defaults to twice the topology's spout pending
	// bound (its roots, and the orphans of failed ones) spread over the
	// shards plus 1024, and whose Seed defaults to the topology's. The
	// topology sets the rest itself and Build refuses them set: the port
	// shape (Producers, Tasks, Receivers, ReceiverOf) and Planner, which
	// are the engine's, and Shard.Timeout, Shard.Clock,
	// Shard.ProgressTimeout and Shard.ProgressCap, which come from
	// MessageTimeout, Clock, ProgressTimeout and ResetCap. Build checks it
	// as acker.New would. Leave it zero with Port.
	Acker acker.Config
	// MessageTimeout fails a root whose tree is not fully acked in time;
	// default DefaultMessageTimeout. A whole number of milliseconds.
	MessageTimeout time.Duration
	// ResetCap bounds how far RESETs can extend a root's life: a RESET
	// never moves a root's deadline past its emit time plus ResetCap.
	// Default DefaultResetCap x MessageTimeout.
	ResetCap time.Duration
	// ProgressTimeout makes MessageTimeout count from a tree's last
	// progress (a bolt acking one of its tuples) instead of its emit, up
	// to ResetCap after the emit. A tree that keeps progressing behind a
	// slow bolt then does not time out; one that stops times out one
	// timeout after its last progress. The in-process acker does it
	// itself (ackcore.Config.ProgressTimeout: one 32-bit store per ACK);
	// with a Port acker, an ack of a root older than a quarter of the
	// timeout sends a RESET for it before the ACK, and a tree that stops
	// times out between 3/4 and 1 timeout after its last progress.
	// Progress is counted when the acker gets the ACK, and a bolt sends
	// its ACKs once per pass (up to Batch inputs per input ring, and
	// whenever it runs out of input): behind a bolt that takes 1.3 ms an
	// input with Batch 64, a tree's progress reaches the acker up to a
	// pass, some 85 ms, late, and a tree that progressed 75-87 ms before
	// its deadline times out. Give a slow bolt's topology a small Batch
	// (Batch 1 sends each ACK after its Execute), or a MessageTimeout
	// well above a pass. Off by default, as in Storm: a timeout that only
	// progress can stretch hides a slow topology from the operator who
	// tuned it.
	ProgressTimeout bool
	// MaxSpoutPending bounds each spout task's roots in flight; default
	// DefaultMaxSpoutPending. Roots waiting out a replay's backoff are
	// not in flight and do not count, up to as many again: a task is not
	// asked for a new message while MaxSpoutPending of its roots wait.
	// The values the engine keeps are bounded by twice MaxSpoutPending.
	MaxSpoutPending int
	// Adaptive, when its TargetP99 is set, varies each spout executor's
	// pending bound between Adaptive.Min and MaxSpoutPending to hold the
	// complete-latency p99 under the target.
	Adaptive Adaptive
	// Retry is the replay policy for failed roots.
	Retry RetryPolicy
	// DeadLetter, if set, receives each message that failed its last
	// attempt (before the spout's Fail). It runs on the spout executor's
	// goroutine.
	DeadLetter func(DeadLetter)
	// Breaker is the retry-storm breaker; off unless FailureRate is set.
	Breaker Breaker
	// TraceEvery traces one root in TraceEvery (per spout executor):
	// when a traced root times out, its Failure names the tasks holding
	// its unacked tuples and for how long (Failure.Held), and
	// ComponentMetrics.TimeoutsHeld counts it against each component
	// named. Default DefaultTraceEvery; negative traces nothing. The
	// roots not traced cost a nil check where a tuple is emitted,
	// executed and acked.
	TraceEvery int
	// PanicStops makes a panic in user code stop the topology: Done is
	// closed, Err returns the *PanicError, the spouts stop emitting and
	// Stop (which the caller still calls) returns it too. By default a
	// panic is recovered: the tuple being executed fails with
	// ackcore.ReasonPanic, and the topology runs on.
	PanicStops bool
	// Logger gets the engine's log lines (recovered panics, at most one
	// line per component per 10 s); nil means slog.Default().
	Logger *slog.Logger

	// Pin pins every executor (and the in-process acker's shards) to a
	// CPU of its own, all planned by one affinity.Planner, the shards
	// first (Plan, and the acker's Plan). Where they outnumber the
	// allowed CPUs Start pins none of them, and Plan's Note says so: a
	// pinned goroutine keeps its thread, which hands its processor over
	// each time it waits, and pinned threads sharing a CPU ran slower
	// than unpinned ones (ackbench's word count at topology level, a
	// shard and three executors on 2 CPUs: 1.2-1.6x the trees a second
	// unpinned).
	Pin bool
	// RingSize is each executor-to-executor ring's capacity (a power of
	// two); default DefaultRingSize.
	RingSize int
	// Batch is the executors' batch size; default DefaultBatch. A bolt
	// publishes its emits and acker messages after each pass (up to Batch
	// inputs per input ring) and when it runs out of input: a bolt that
	// takes long per input holds its earlier inputs' acks that long (a
	// tree's progress under ProgressTimeout, too), so give slow bolts a
	// small Batch.
	Batch int
	// SpoutWait is how long a spout executor waits when no task emitted
	// anything; default DefaultSpoutWait.
	SpoutWait time.Duration
	// Idle is how executors, the in-process acker's included (unless
	// Acker.Idle is set), wait for work; nil means ring.DefaultIdle()
	// (a short spin: the shards share the processors with the executors).
	Idle *ring.Idle
	// Clock is the engine's and the in-process acker's time source; nil
	// means a monotonic clock. Tests pass an ackcore.FakeClock.
	Clock ackcore.Clock
	// Seed seeds edge and root ids and shuffles; 0 draws one at random.
	Seed uint64
	// Port, if set, opens the acker the engine talks to (the network
	// acker's client, say) instead of an in-process acker.Acker (Acker
	// must then be zero). The engine calls Stop on it when it stops.
	Port func(acker.Spec) (acker.Port, error)
}

// RetryPolicy says how failed roots are replayed: attempt k+1 starts
// Backoff*2^(k-1) (at most MaxBackoff) after attempt k failed, less a
// random part of up to Jitter of it, with a fresh root id.
type RetryPolicy struct {
	// MaxAttempts is the most attempts per message, counting the first;
	// 0 means DefaultMaxAttempts, 1 means no replays.
	MaxAttempts int
	// Backoff is the wait before the first replay; default
	// DefaultBackoff.
	Backoff time.Duration
	// MaxBackoff caps the wait; default DefaultMaxBackoff.
	MaxBackoff time.Duration
	// Jitter is the fraction of each wait drawn at random, in [0, 1];
	// default DefaultJitter (-1 for none).
	Jitter float64
}

// Delay is the wait after failed attempt k (from 1) of a policy whose
// defaults are filled (as TaskContext.Config returns it):
// Backoff*2^(k-1), at most MaxBackoff, less the fraction Jitter*u of it
// (none for Jitter -1); u is a random number in [0, 1).
func (r RetryPolicy) Delay(k int, u float64) time.Duration {
	d := r.Backoff
	for i := 1; i < k && d < r.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, r.MaxBackoff)
	return d - time.Duration(float64(d)*max(r.Jitter, 0)*u)
}

// Breaker is the retry-storm breaker of each spout executor: when, over
// the last Window, at least MinOutcomes first attempts ended and at least
// FailureRate of them failed (the first attempts still in flight that
// were emitted no later than a failed one, to a tenth of the window,
// count as not failed), it opens: for
// OpenFor the executor starts no new message, holding those Next emits,
// then lets Probes of them through; if they all complete it closes, if
// one fails it opens again for twice as long (up to MaxOpenFor).
// Replays wait while it holds new messages, and go at their own backoff
// when the spout has none to give, or, once each while it stays open,
// when a probe fails (poison or an outage: the replays tell): a replay's
// outcome is never counted and never reopens it, and one that completes
// closes it. Next is called
// while it is open (until a task holds MaxSpoutPending new messages), so
// untracked streams keep flowing. docs/semantics.md has the rules.
type Breaker struct {
	FailureRate float64       // in (0, 1]; 0 turns the breaker off
	Window      time.Duration // default DefaultBreakerWindow
	MinOutcomes int           // default DefaultBreakerMinOutcomes
	OpenFor     time.Duration // default DefaultBreakerOpenFor
	MaxOpenFor  time.Duration // default DefaultBreakerMaxOpenFor
	Probes      int           // default DefaultBreakerProbes
}

// Adaptive is the adaptive pending bound: every Interval each spout
// executor compares the p99 of the complete latencies of the roots that
// completed in it with TargetP99, and cuts its bound by a quarter when
// above, or raises it by an eighth (at least 1) when below 0.8 x target
// and the bound was reached.
type Adaptive struct {
	TargetP99 time.Duration // 0: off
	Min       int           // the least bound; default DefaultAdaptiveMin
	Interval  time.Duration // default DefaultAdaptiveInterval
}

// idle is Config.Idle, or the engine's default when it is nil:
// ring.DefaultIdle(), a spin of under a microsecond, then yields, then a
// park, for the engine's executors and the in-process acker's shards,
// producers and receivers alike (unless Acker.Idle is set). Not the
// acker's own default (acker.DefaultIdle, a spin of some 20 us for an
// executor with a processor to itself): here the shards share the
// processors with the spouts and bolts, and a long spin takes their CPU
// (with the acker's default, acked word count trees/s fell by a
// quarter).
func (c *Config) idle() ring.Idle {
	if c.Idle != nil {
		return *c.Idle
	}
	return ring.DefaultIdle()
}

// acking reports whether acking is on.
func (c *Config) acking() bool { return !c.AtMostOnce }

// validateAcker fills and checks the acker fields (AtMostOnce, Acker,
// Port) of validate's copy: every problem through bad.
func (c *Config) validateAcker(bad func(format string, args ...any)) {
	a := &c.Acker
	set := !reflect.ValueOf(*a).IsZero()
	switch {
	case c.AtMostOnce && c.Port != nil:
		bad("topology: Config.AtMostOnce with Port set: an at-most-once topology has no acker")
	case c.AtMostOnce && set:
		bad("topology: Config.AtMostOnce with Acker set: an at-most-once topology has no acker")
	case c.Port != nil && set:
		bad("topology: Config.Port and Acker both set: Acker configures the in-process acker, Port opens another")
	}
	if c.AtMostOnce || c.Port != nil {
		return
	}
	owned := func(field string, isSet bool, why string) {
		if isSet {
			bad("topology: Config.Acker.%s is set: %s; leave it zero", field, why)
		}
	}
	const shape = "the topology sets it (the port shape of its executors and spout tasks)"
	owned("Producers", a.Producers != 0, shape)
	owned("Tasks", a.Tasks != 0, shape)
	owned("Receivers", a.Receivers != 0, shape)
	owned("ReceiverOf", a.ReceiverOf != nil, shape)
	owned("Planner", a.Planner != nil, "the topology plans its executors and the shards with one planner (Config.Pin)")
	owned("Shard.Timeout", a.Shard.Timeout != 0, "it is Config.MessageTimeout")
	owned("Shard.Clock", a.Shard.Clock != nil, "it is Config.Clock")
	owned("Shard.ProgressTimeout", a.Shard.ProgressTimeout, "it is Config.ProgressTimeout")
	owned("Shard.ProgressCap", a.Shard.ProgressCap != 0, "it is Config.ResetCap, with Config.ProgressTimeout")
	a.Shards = cmp.Or(a.Shards, acker.DefaultShards)
	if a.Shards < 1 || a.Shards > acker.MaxShards {
		bad("topology: Config.Acker.Shards %d out of range [1, %d] (0: acker.DefaultShards; at most once is AtMostOnce)", a.Shards, acker.MaxShards)
	}
	if a.Shard.MaxPending < 0 || a.Shard.MaxPending > ackcore.MaxPendingLimit {
		bad("topology: Config.Acker.Shard.MaxPending %d out of range [0, %d]", a.Shard.MaxPending, ackcore.MaxPendingLimit)
	}
}

// Limits of Config's fields.
const (
	maxSpoutPending = 1 << 20
	maxAttempts     = 1 << 16
	maxRingSize     = 1 << 24
)

// validate is the one check of a Config: it fills every zero field that
// has a default (from the Default constants, ResetCap from
// DefaultResetCap timeouts; Breaker's and Adaptive's only when they are
// on; Clock a monotonic clock), checks every field, and returns the
// filled copy and every problem found, joined, each naming the field and
// the value. Build keeps the copy.
func (c Config) validate() (Config, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	c.validateAcker(bad)
	c.MessageTimeout = cmp.Or(c.MessageTimeout, DefaultMessageTimeout)
	if c.MessageTimeout < time.Millisecond || c.MessageTimeout > ackcore.MaxTimeout || c.MessageTimeout%time.Millisecond != 0 {
		bad("topology: Config.MessageTimeout %v is not a whole number of milliseconds in [1ms, %v]", c.MessageTimeout, ackcore.MaxTimeout)
	}
	c.ResetCap = cmp.Or(c.ResetCap, DefaultResetCap*c.MessageTimeout)
	if c.ResetCap < c.MessageTimeout {
		bad("topology: Config.ResetCap %v is below MessageTimeout %v", c.ResetCap, c.MessageTimeout)
	}
	c.MaxSpoutPending = cmp.Or(c.MaxSpoutPending, DefaultMaxSpoutPending)
	if c.MaxSpoutPending < 1 || c.MaxSpoutPending > maxSpoutPending {
		bad("topology: Config.MaxSpoutPending %d out of range [1, %d]", c.MaxSpoutPending, maxSpoutPending)
	}
	if a := &c.Adaptive; a.TargetP99 != 0 {
		if a.TargetP99 < 0 {
			bad("topology: Config.Adaptive.TargetP99 %v is negative", a.TargetP99)
		}
		a.Min = cmp.Or(a.Min, DefaultAdaptiveMin)
		if a.Min < 1 || a.Min > c.MaxSpoutPending {
			bad("topology: Config.Adaptive.Min %d out of range [1, MaxSpoutPending %d]", a.Min, c.MaxSpoutPending)
		}
		a.Interval = cmp.Or(a.Interval, DefaultAdaptiveInterval)
		if a.Interval < 0 {
			bad("topology: Config.Adaptive.Interval %v is negative", a.Interval)
		}
	}
	r := &c.Retry
	r.MaxAttempts = cmp.Or(r.MaxAttempts, DefaultMaxAttempts)
	if r.MaxAttempts < 1 || r.MaxAttempts > maxAttempts {
		bad("topology: Config.Retry.MaxAttempts %d out of range [1, %d]", r.MaxAttempts, maxAttempts)
	}
	r.Backoff = cmp.Or(r.Backoff, DefaultBackoff)
	r.MaxBackoff = cmp.Or(r.MaxBackoff, DefaultMaxBackoff)
	if r.Backoff < 0 || r.MaxBackoff < r.Backoff {
		bad("topology: Config.Retry.Backoff %v / MaxBackoff %v: want 0 <= Backoff <= MaxBackoff", r.Backoff, r.MaxBackoff)
	}
	switch {
	case r.Jitter == 0:
		r.Jitter = DefaultJitter
	case r.Jitter == -1: // kept, so that the filled copy validates to itself; Delay reads it as 0
	case math.IsNaN(r.Jitter) || r.Jitter < 0 || r.Jitter > 1:
		bad("topology: Config.Retry.Jitter %v out of range [0, 1] (-1 for none)", r.Jitter)
	}
	if b := &c.Breaker; b.FailureRate != 0 {
		if math.IsNaN(b.FailureRate) || b.FailureRate < 0 || b.FailureRate > 1 {
			bad("topology: Config.Breaker.FailureRate %v out of range (0, 1]", b.FailureRate)
		}
		b.Window = cmp.Or(b.Window, DefaultBreakerWindow)
		b.MinOutcomes = cmp.Or(b.MinOutcomes, DefaultBreakerMinOutcomes)
		b.OpenFor = cmp.Or(b.OpenFor, DefaultBreakerOpenFor)
		b.MaxOpenFor = cmp.Or(b.MaxOpenFor, DefaultBreakerMaxOpenFor)
		b.Probes = cmp.Or(b.Probes, DefaultBreakerProbes)
		if b.Window < 0 || b.MinOutcomes < 1 || b.OpenFor < 0 || b.MaxOpenFor < b.OpenFor || b.Probes < 1 {
			bad("topology: Config.Breaker %+v: want Window > 0, MinOutcomes >= 1, 0 <= OpenFor <= MaxOpenFor, Probes >= 1", *b)
		}
	}
	c.RingSize = cmp.Or(c.RingSize, DefaultRingSize)
	if c.RingSize < 2 || c.RingSize > maxRingSize || c.RingSize&(c.RingSize-1) != 0 {
		bad("topology: Config.RingSize %d is not a power of two in [2, %d]", c.RingSize, maxRingSize)
	}
	c.Batch = cmp.Or(c.Batch, DefaultBatch)
	if c.Batch < 1 || c.Batch > c.RingSize {
		bad("topology: Config.Batch %d out of range [1, RingSize %d]", c.Batch, c.RingSize)
	}
	c.SpoutWait = cmp.Or(c.SpoutWait, DefaultSpoutWait)
	c.TraceEvery = cmp.Or(c.TraceEvery, DefaultTraceEvery)
	if c.SpoutWait < 0 {
		bad("topology: Config.SpoutWait %v is negative", c.SpoutWait)
	}
	if c.Clock == nil {
		c.Clock = ackcore.NewMonotonicClock()
	}
	return c, errors.Join(errs...)
}
