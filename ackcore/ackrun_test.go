package ackcore_test

import (
	"slices"
	"testing"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/acktest"
	"github.com/xorack/xorack/internal/acktest/workload"
	"github.com/xorack/xorack/internal/testkit"
)

// TestApplyLongBatches applies one word-count stream, the fifth of its
// messages made INITs with their own timeout, through shards in batches
// longer than the assembly loop applies in one call (several calls a
// batch, some stopping inside for a slow message), with ackRun and with
// ackRunFar, and through one a message at a time. Their outcomes, in
// order, and their counters must agree.
// Under -short (CI's race and invariants steps, where every call's checks
// read the whole table) the stream is a quarter as long, over a table a
// quarter the size: still nine batches, each several calls.
func TestApplyLongBatches(t *testing.T) {
	st := workload.Build(workload.WordCount, testkit.Size(2000, 500), 1)
	msgs := slices.Concat(st.Prefix, st.Cycle)
	for i := range msgs {
		if msgs[i].Kind == ackcore.Init && msgs[i].Root%5 == 0 {
			msgs[i].TimeoutMs = 1000 + uint32(msgs[i].Root%7)
		}
	}
	run := func(batch int, far bool) ([]ackcore.Outcome, ackcore.Stats) {
		s := mustShard(t, ackcore.Config{MaxPending: st.MaxPending(), Clock: &ackcore.FakeClock{}, Seed: 3})
		if far {
			s.ForcePrefetch() // ackRunFar, as tables past farAbove run
		}
		var all []ackcore.Outcome
		for i := 0; i < len(msgs); i += batch {
			all = s.Apply(msgs[i:min(i+batch, len(msgs))], all)
		}
		mustVerify(t, s)
		return all, s.Stats()
	}
	single, singleStats := run(1, false)
	for _, far := range []bool{false, true} {
		long, longStats := run(1000, far)
		if longStats.Completed == 0 || longStats.Completed != uint64(len(long)) {
			t.Fatalf("batches of 1000 (far %v): %d outcomes, stats %+v", far, len(long), longStats)
		}
		if !slices.Equal(long, single) || longStats != singleStats {
			t.Fatalf("batches of 1000 (far %v): %d outcomes, stats %+v; one at a time: %d, %+v", far, len(long), longStats, len(single), singleStats)
		}
	}
}

// TestLastGroupTag255 runs roots homed in the last group, among them
// roots whose tag is 0xff, the sentinel's byte, through each loop: the
// assembly loop compares the last group's tags together with the
// sentinel's and predicts slots past the table, in its padding. Each root
// is INITed, acked part way, acked to completion; some are acked before
// their INIT. Every root must complete, once, with its task.
func TestLastGroupTag255(t *testing.T) {
	for _, path := range rulePaths {
		t.Run(path.name, func(t *testing.T) {
			const seed, maxPending = 5, 200
			s := mustShard(t, ackcore.Config{MaxPending: maxPending, Clock: &ackcore.FakeClock{}, Seed: seed})
			path.setup(t, s)
			ng := s.Groups()
			var roots []uint64
			ff := 0
			for r := uint64(1); len(roots) < 40 && r < 1<<22; r++ {
				root := r * 0x9e3779b97f4a7c15
				if ackcore.HomeOf(seed, ng, root) != int64(ng-1) {
					continue
				}
				if ackcore.TagOf(seed, ng, root) == 0xff {
					ff++
				} else if len(roots)-ff >= 30 {
					continue // room for the rarer tag
				}
				roots = append(roots, root)
			}
			if ff < 10 {
				t.Fatalf("%d roots of tag 0xff", ff)
			}
			var msgs []ackcore.Msg
			for i, r := range roots {
				if i%4 == 0 { // an early ACK, before the INIT
					msgs = append(msgs, acktest.AckMsg(r, 7))
					msgs = append(msgs, acktest.InitMsg(r, uint32(i), 1^7))
				} else {
					msgs = append(msgs, acktest.InitMsg(r, uint32(i), 1))
				}
			}
			for _, r := range roots {
				msgs = append(msgs, acktest.AckMsg(r, 1^2))
			}
			for _, r := range roots {
				msgs = append(msgs, acktest.AckMsg(r, 2))
			}
			out := s.Apply(msgs, nil)
			mustVerify(t, s)
			if len(out) != len(roots) {
				t.Fatalf("%d outcomes for %d roots: %v", len(out), len(roots), out)
			}
			for i, o := range out {
				if o.Kind != ackcore.Completed || o.Root != roots[i] || o.Task != uint32(i) {
					t.Fatalf("outcome %d: %+v, want root %#x completed with task %d", i, o, roots[i], i)
				}
			}
			if st := s.Stats(); st.Pending != 0 {
				t.Fatalf("%d pending after every root completed", st.Pending)
			}
		})
	}
}
