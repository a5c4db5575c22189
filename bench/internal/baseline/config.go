package baseline

import (
	"cmp"
	"fmt"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// Config configures a baseline, with the fields of ackcore.Config that
// mean the same thing for every acker. FromShardConfig converts.
type Config struct {
	// MaxPending bounds the entries pending at once, with or without INIT
	// (docs/semantics.md, rule 10). Required, in [1, ackcore.MaxPendingLimit].
	MaxPending int
	// Timeout is the default per-root timeout; 0 means
	// ackcore.DefaultTimeout. Storm rotates its buckets once per Timeout.
	Timeout time.Duration
	// Tick is the timer resolution; 0 means ackcore.DefaultTick. Storm and
	// Limit have no timer wheel and ignore it.
	Tick time.Duration
	// Clock is the time source; nil means ackcore.NewMonotonicClock().
	// Every baseline reads it once per Apply or Expire call.
	Clock ackcore.Clock
}

// FromShardConfig keeps the fields of c a baseline understands; Seed, a
// shard detail, is dropped.
func FromShardConfig(c ackcore.Config) Config {
	return Config{MaxPending: c.MaxPending, Timeout: c.Timeout, Tick: c.Tick, Clock: c.Clock}
}

// validate is the one check of a Config, with the shard's limits: it
// fills Timeout, Tick and Clock with ackcore's defaults and returns the
// filled copy, or an error naming the field and the value.
func (c Config) validate() (Config, error) {
	if c.MaxPending <= 0 || c.MaxPending > ackcore.MaxPendingLimit {
		return c, fmt.Errorf("baseline: Config.MaxPending %d out of range [1, %d]", c.MaxPending, ackcore.MaxPendingLimit)
	}
	if c.Timeout < 0 || c.Timeout > ackcore.MaxTimeout {
		return c, fmt.Errorf("baseline: Config.Timeout %v out of range [0, %v]", c.Timeout, ackcore.MaxTimeout)
	}
	if c.Tick < 0 || c.Tick > time.Second || (c.Tick > 0 && c.Tick < time.Microsecond) {
		return c, fmt.Errorf("baseline: Config.Tick %v out of range [1µs, 1s]", c.Tick)
	}
	c.Timeout = cmp.Or(c.Timeout, ackcore.DefaultTimeout)
	c.Tick = cmp.Or(c.Tick, ackcore.DefaultTick)
	if c.Timeout%c.Tick != 0 {
		return c, fmt.Errorf("baseline: Config.Timeout %v is not a whole number of ticks (Tick %v)", c.Timeout, c.Tick)
	}
	if c.Clock == nil {
		c.Clock = ackcore.NewMonotonicClock()
	}
	return c, nil
}

// invalid reports whether m is malformed (ackcore's one definition,
// Msg.Valid, which allocates nothing).
func invalid(m *ackcore.Msg) bool { return !m.Valid() }

// refuseInvalid is the outcome of a malformed message (Msg.InvalidOutcome).
func refuseInvalid(m *ackcore.Msg) ackcore.Outcome { return m.InvalidOutcome() }

// applyEach applies msgs in order, appending their outcomes to out: a
// malformed message is refused and counted in st.RefusedInvalid, a valid
// one goes to apply. It is the Apply of GoMap and Storm, each with its
// own rules for one message.
func applyEach(msgs []ackcore.Msg, out []ackcore.Outcome, st *ackcore.Stats, apply func(*ackcore.Msg, []ackcore.Outcome) []ackcore.Outcome) []ackcore.Outcome {
	for i := range msgs {
		m := &msgs[i]
		if invalid(m) {
			st.RefusedInvalid++
			out = append(out, refuseInvalid(m))
			continue
		}
		out = apply(m, out)
	}
	return out
}

// refuseFull is the outcome of an ACK, FAIL or RESET that needed a new
// entry at the bound.
func refuseFull(root uint64) ackcore.Outcome {
	return ackcore.Outcome{Root: root, Task: ackcore.NoTask, Kind: ackcore.Refused, Reason: ackcore.ReasonFull}
}

// The entry's 32-bit word in GoMap and XsyncMap, as in the shard's table:
// task id in the low 20 bits (ackcore.MaxTask), flags above.
const (
	flagInit   uint32 = 1 << 31 // an INIT was seen: the task is known
	flagFailed uint32 = 1 << 30 // a FAIL arrived before the INIT (sticky)
	flagCustom uint32 = 1 << 29 // GoMap: start or timeout live in the custom map
	// flagDrain: without flagInit only, a drain (rule 3): what a tree a FAIL
	// carrying its val failed still owes, removed when its val reaches 0.
	flagDrain uint32 = 1 << 28
	taskMask  uint32 = ackcore.MaxTask
)

// ticks converts clock readings to wheel ticks with the shard's rules:
// deadlines and INIT start ticks are both rounded up to a tick boundary, so
// a root with the default timeout has start = deadline - defTicks exactly
// (the timeout is a whole number of ticks) and need not store its start.
// Immutable after construction.
type ticks struct {
	clock    ackcore.Clock
	tickNs   int64
	defNs    int64  // default timeout, ns
	defTicks uint64 // default timeout in ticks (exact: Config checks it)
}

func newTicks(c Config) ticks {
	t := ticks{clock: c.Clock, tickNs: int64(c.Tick), defNs: int64(c.Timeout)}
	t.defTicks = uint64(t.defNs / t.tickNs)
	return t
}

// now reads the clock, never below 0 nor below last (a clock that steps
// back makes time stand still), and returns the time in ns and ticks.
func (t *ticks) now(last int64) (ns int64, tick uint64) {
	ns = max(int64(t.clock.Now()), last, 0)
	return ns, uint64(ns / t.tickNs)
}

// deadlineAfter is the tick at which a timeout of d ns started at nowNs
// expires: the first tick boundary at or after nowNs+d.
func (t *ticks) deadlineAfter(nowNs, d int64) uint64 {
	return uint64((nowNs + d + t.tickNs - 1) / t.tickNs)
}

// startTick is the start tick recorded for an INIT at nowNs: the tick
// boundary at or after it, the rounding deadlineAfter uses.
func (t *ticks) startTick(nowNs int64) uint64 {
	return uint64((nowNs + t.tickNs - 1) / t.tickNs)
}

// latency is the time at nowNs since an INIT whose start tick is start.
// The INIT happened within the tick before start, so half a tick is added
// back: the error is at most half a tick (the shard's rule).
func (t *ticks) latency(nowNs int64, start uint64) time.Duration {
	return time.Duration(max(nowNs-int64(start)*t.tickNs+t.tickNs/2, 0))
}

// msgTimeout is the timeout m asks for in ns, or def when it asks for none.
func msgTimeout(m *ackcore.Msg, def int64) int64 {
	if m.TimeoutMs == 0 {
		return def
	}
	return int64(m.TimeoutMs) * int64(time.Millisecond)
}
