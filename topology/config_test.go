package topology

import (
	"strings"
	"testing"
	"time"

	"github.com/xorack/xorack/acker"
)

// TestConfigDefaults: validate fills every defaulted field from its
// Default constant (the breaker's and the adaptive bound's once they are
// on), the filled copy validates to itself, and a bad value is named with
// its package, type, field and value.
func TestConfigDefaults(t *testing.T) {
	got, err := Config{Breaker: Breaker{FailureRate: 0.5}, Adaptive: Adaptive{TargetP99: time.Second}}.validate()
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Acker:           acker.Config{Shards: acker.DefaultShards},
		MessageTimeout:  DefaultMessageTimeout,
		ResetCap:        DefaultResetCap * DefaultMessageTimeout,
		MaxSpoutPending: DefaultMaxSpoutPending,
		Adaptive:        Adaptive{TargetP99: time.Second, Min: DefaultAdaptiveMin, Interval: DefaultAdaptiveInterval},
		Retry:           RetryPolicy{MaxAttempts: DefaultMaxAttempts, Backoff: DefaultBackoff, MaxBackoff: DefaultMaxBackoff, Jitter: DefaultJitter},
		Breaker: Breaker{FailureRate: 0.5, Window: DefaultBreakerWindow, MinOutcomes: DefaultBreakerMinOutcomes,
			OpenFor: DefaultBreakerOpenFor, MaxOpenFor: DefaultBreakerMaxOpenFor, Probes: DefaultBreakerProbes},
		TraceEvery: DefaultTraceEvery,
		RingSize:   DefaultRingSize,
		Batch:      DefaultBatch,
		SpoutWait:  DefaultSpoutWait,
		Clock:      got.Clock,
	}
	if got.Clock == nil || got.Acker.Shards != want.Acker.Shards || got.MessageTimeout != want.MessageTimeout ||
		got.ResetCap != want.ResetCap || got.MaxSpoutPending != want.MaxSpoutPending || got.Adaptive != want.Adaptive ||
		got.Retry != want.Retry || got.Breaker != want.Breaker || got.TraceEvery != want.TraceEvery ||
		got.RingSize != want.RingSize || got.Batch != want.Batch || got.SpoutWait != want.SpoutWait {
		t.Errorf("filled\n%+v\nwant\n%+v", got, want)
	}
	if again, err := got.validate(); err != nil || again.Retry != got.Retry || again.Breaker != got.Breaker || again.ResetCap != got.ResetCap {
		t.Errorf("validate(filled) = %+v, %v; want the same copy", again, err)
	}
	// Jitter -1 (none) stays -1, so that the filled copy validates to
	// itself, and Delay draws nothing off.
	none, err := Config{Retry: RetryPolicy{Jitter: -1}}.validate()
	if again, err2 := none.validate(); err != nil || err2 != nil || none.Retry.Jitter != -1 || again.Retry != none.Retry {
		t.Errorf("Jitter -1: filled %+v (%v), again %+v (%v)", none.Retry, err, again.Retry, err2)
	}
	if d := none.Retry.Delay(2, 0.9); d != 2*DefaultBackoff {
		t.Errorf("Jitter -1: Delay(2, 0.9) = %v, want %v", d, 2*DefaultBackoff)
	}
	if d := got.Retry.Delay(2, 0.5); d != 2*DefaultBackoff-time.Duration(float64(2*DefaultBackoff)*DefaultJitter*0.5) {
		t.Errorf("Delay(2, 0.5) = %v", d)
	}
	if _, err := (Config{Retry: RetryPolicy{Jitter: 2}}).validate(); err == nil ||
		err.Error() != "topology: Config.Retry.Jitter 2 out of range [0, 1] (-1 for none)" {
		t.Errorf("Jitter 2: %v", err)
	}
	if _, err := (Config{MaxSpoutPending: -1, Batch: -2}).validate(); err == nil ||
		!strings.Contains(err.Error(), "Config.MaxSpoutPending -1") || !strings.Contains(err.Error(), "Config.Batch -2") {
		t.Errorf("two bad fields: %v, want both named", err)
	}
}
