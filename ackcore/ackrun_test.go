package ackcore_test

import (
	"slices"
	"testing"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/acktest/workload"
)

// TestApplyLongBatches applies one word-count stream, the fifth of its
// messages made INITs with their own timeout, through two shards: one in
// batches longer than the assembly loop applies in one call (several
// calls a batch, some stopping inside for a slow message), one a message
// at a time. Their outcomes, in order, and their counters must agree.
func TestApplyLongBatches(t *testing.T) {
	st := workload.Build(workload.WordCount, 2000, 1)
	msgs := slices.Concat(st.Prefix, st.Cycle)
	for i := range msgs {
		if msgs[i].Kind == ackcore.Init && msgs[i].Root%5 == 0 {
			msgs[i].TimeoutMs = 1000 + uint32(msgs[i].Root%7)
		}
	}
	run := func(batch int) ([]ackcore.Outcome, ackcore.Stats) {
		s := mustShard(t, ackcore.Config{MaxPending: st.MaxPending(), Clock: &ackcore.FakeClock{}, Seed: 3})
		var all []ackcore.Outcome
		for i := 0; i < len(msgs); i += batch {
			all = s.Apply(msgs[i:min(i+batch, len(msgs))], all)
		}
		mustVerify(t, s)
		return all, s.Stats()
	}
	long, longStats := run(1000)
	single, singleStats := run(1)
	if longStats.Completed == 0 || longStats.Completed != uint64(len(long)) {
		t.Fatalf("batches of 1000: %d outcomes, stats %+v", len(long), longStats)
	}
	if !slices.Equal(long, single) || longStats != singleStats {
		t.Fatalf("batches of 1000: %d outcomes, stats %+v; one at a time: %d, %+v", len(long), longStats, len(single), singleStats)
	}
}
