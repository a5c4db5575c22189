package ackcore_test

import (
	"fmt"
	"testing"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/ackcore/acktest"
)

func shardFactory(fold ackcore.FoldMode) acktest.Factory {
	return func(c ackcore.Config) (ackcore.Interface, error) { c.Fold = fold; return ackcore.NewShard(c) }
}

// TestShardMatchesModel feeds random trees and DAGs with shuffles,
// duplicates, drops, fails, resets, timeouts and tight bounds to the shard
// and to the plain model (ackcore/acktest/model), and compares every outcome,
// every counter and the shard's invariants (ackcore/acktest).
func TestShardMatchesModel(t *testing.T) {
	// FoldOff runs applyRun's assembly loop where the CPU has AVX2
	// ("asm"), and the portable loop ("go") everywhere.
	t.Run("fold=0/go", func(t *testing.T) {
		defer ackcore.SetAckRun(false)()
		acktest.RunCases(t, 40, shardFactory(ackcore.FoldOff), func(acktest.Case) bool { return true })
	})
	for _, fold := range []ackcore.FoldMode{ackcore.FoldOff, ackcore.FoldOn} {
		t.Run(fmt.Sprintf("fold=%d", fold), func(t *testing.T) {
			// Every case, the tight and tiny bounds included: folding
			// must not change results at the bound either.
			acktest.RunCases(t, 40, shardFactory(fold), nil)
		})
	}
	// The path of tables larger than L2 (homes hashed and prefetched a
	// chunk ahead, ackRunHS reading them), on the small tables of the
	// standard cases.
	t.Run("fold=0/prefetch", func(t *testing.T) {
		acktest.RunCases(t, 20, func(c ackcore.Config) (ackcore.Interface, error) {
			s, err := ackcore.NewShard(c)
			if err == nil {
				s.ForcePrefetch()
			}
			return s, err
		}, nil)
	})
	t.Run("fold=1/go", func(t *testing.T) {
		defer ackcore.SetAckRun(false)()
		acktest.RunCases(t, 40, shardFactory(ackcore.FoldOn), func(c acktest.Case) bool { return c.MaxPending < 4096 })
	})
}

// TestShardMatchesModelProgress: the same cases with ProgressTimeout, the
// model holding the shard to "a root times out one timeout after its last
// progress, at most ProgressCap after its INIT", folded and not.
func TestShardMatchesModelProgress(t *testing.T) {
	seeds := 20
	if testing.Short() {
		seeds = 4
	}
	for _, fold := range []ackcore.FoldMode{ackcore.FoldOff, ackcore.FoldOn} {
		for _, c := range acktest.Cases() {
			t.Run(fmt.Sprintf("fold=%d/%s", fold, c.Name), func(t *testing.T) {
				for s := range seeds {
					sc := c.Scenario
					sc.Seed, sc.Progress = uint64(s+1), true
					acktest.Run(t, sc, shardFactory(fold))
				}
			})
		}
	}
}

func FuzzShard(f *testing.F) {
	f.Add(uint64(1), uint8(50), uint8(8), uint8(0), false)
	f.Add(uint64(2), uint8(200), uint8(3), uint8(40), true)
	f.Add(uint64(3), uint8(30), uint8(1), uint8(90), false)
	f.Add(uint64(1<<10|4|1), uint8(120), uint8(12), uint8(30), true) // drains, owners, the portable loop
	f.Add(uint64(1<<10|2), uint8(150), uint8(40), uint8(20), false)  // drains, progress timeouts
	f.Fuzz(func(t *testing.T, seed uint64, roots, bound, faults uint8, fold bool) {
		if seed&1 == 1 { // odd seeds: the portable loop instead of ackRun
			defer ackcore.SetAckRun(false)()
		}
		sc := acktest.FuzzScenario(seed, roots, bound, faults)
		sc.Progress = seed&2 != 0 // seeds with bit 1: progress timeouts
		mode := ackcore.FoldOff
		if fold {
			mode = ackcore.FoldOn // at the fuzzer's bound too
		}
		acktest.Run(t, sc, shardFactory(mode))
	})
}

// TestShardMatchesModelOwners: the owners cases (batches from several
// owners, each bounded to a few orphans) against the model, with the
// assembly loop, the portable one and folding; the shards must have
// refused some orphans at their owners' share, so that the bound is
// exercised, not just allowed.
func TestShardMatchesModelOwners(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	for _, mode := range []struct {
		name string
		fold ackcore.FoldMode
		asm  bool
	}{{"fold=0", ackcore.FoldOff, true}, {"fold=0/go", ackcore.FoldOff, false}, {"fold=1", ackcore.FoldOn, true}} {
		for _, c := range acktest.Cases() {
			if c.Owners < 2 {
				continue
			}
			t.Run(mode.name+"/"+c.Name, func(t *testing.T) {
				if !mode.asm {
					defer ackcore.SetAckRun(false)()
				}
				var refused, evicted uint64
				var shards []*ackcore.Shard
				for s := range seeds {
					sc := c.Scenario
					sc.Seed = uint64(s + 1)
					acktest.Run(t, sc, func(cfg ackcore.Config) (ackcore.Interface, error) {
						cfg.Fold = mode.fold
						sh, err := ackcore.NewShard(cfg)
						if err == nil {
							shards = append(shards, sh)
						}
						return sh, err
					})
				}
				for _, sh := range shards {
					st := sh.Stats()
					refused += st.OrphansRefused
					evicted += st.OrphansEvicted
					var per uint64
					for o := range sh.Owners() {
						os := sh.OwnerStats(o)
						per += os.Refused
						if os.Orphans != 0 {
							t.Errorf("owner %d: %d orphans left after every deadline passed", o, os.Orphans)
						}
					}
					if per != st.OrphansRefused {
						t.Errorf("owners refused %d, shard %d", per, st.OrphansRefused)
					}
				}
				if refused == 0 {
					t.Errorf("no orphan refused at an owner's share in %d seeds", seeds)
				}
				t.Logf("refused %d, evicted %d", refused, evicted)
			})
		}
	}
}
