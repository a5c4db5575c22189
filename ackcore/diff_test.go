package ackcore_test

import (
	"flag"
	"testing"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/acktest"
	"github.com/xorack/xorack/internal/testkit"
)

// shardFactory makes shards, with ackRun (the assembly loop, where the
// CPU has it) or without.
func shardFactory(c ackcore.Config) (ackcore.Interface, error) { return ackcore.NewShard(c) }

// long restores TestShardMatchesModel's old 40 seeds a case (20 for the
// prefetching path): minutes on a quiet machine, ten on a busy one.
// FuzzShard explores the same scenarios further in CI's fuzz step.
var long = flag.Bool("long", false, "TestShardMatchesModel: 4x the seeds a case")

// TestShardMatchesModel feeds random trees and DAGs with shuffles,
// duplicates, drops, fails, resets, timeouts and tight bounds to the shard
// and to the plain model (internal/acktest/model), and compares every outcome,
// every counter and the shard's invariants (internal/acktest).
func TestShardMatchesModel(t *testing.T) {
	testkit.SkipUnderRace(t, "a shard on one goroutine: nothing for the race detector to watch")
	// applyRun's assembly loop where the CPU has AVX2 ("asm"), and the
	// portable loop ("go") everywhere; every case, the tight and tiny
	// bounds included.
	seeds := matchSeeds() // RunCases takes a quarter under -short
	t.Run("asm", func(t *testing.T) {
		acktest.RunCases(t, seeds, shardFactory, nil)
	})
	t.Run("go", func(t *testing.T) {
		defer ackcore.SetAckRun(false)()
		acktest.RunCases(t, seeds, shardFactory, nil)
	})
	// The paths of large tables (past prefetchAbove and farAbove), on the
	// small tables of the standard cases: the portable loop's (homes
	// hashed and prefetched a chunk ahead) and ackRunFar, the assembly
	// loop looking further ahead.
	t.Run("prefetch", func(t *testing.T) {
		defer ackcore.SetAckRun(false)()
		acktest.RunCases(t, seeds/2, prefetchFactory, nil)
	})
	t.Run("asm-far", func(t *testing.T) {
		if !ackcore.AckRunAvailable() {
			t.Skip("no AVX2: the assembly loop does not run here")
		}
		acktest.RunCases(t, seeds/2, prefetchFactory, nil)
	})
}

// matchSeeds is how many seeds TestShardMatchesModel gives RunCases for
// the assembly and the portable loop: 10, or 40 with -long.
func matchSeeds() int {
	if *long {
		return 40
	}
	return 10
}

// prefetchFactory makes shards that take Apply's prefetching path
// whatever their size.
func prefetchFactory(c ackcore.Config) (ackcore.Interface, error) {
	s, err := ackcore.NewShard(c)
	if err == nil {
		s.ForcePrefetch()
	}
	return s, err
}

// TestShardMatchesModelProgress: the same cases with ProgressTimeout, the
// model holding the shard to "a root times out one timeout after its last
// progress, at most ProgressCap after its INIT".
func TestShardMatchesModelProgress(t *testing.T) {
	testkit.SkipUnderRace(t, "a shard on one goroutine: nothing for the race detector to watch")
	seeds := 20
	if testing.Short() {
		seeds = 4
	}
	for _, c := range acktest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			for s := range seeds {
				sc := c.Scenario
				sc.Seed, sc.Progress = uint64(s+1), true
				acktest.Run(t, sc, shardFactory)
			}
		})
	}
}

func FuzzShard(f *testing.F) {
	f.Add(uint64(1), uint8(50), uint8(8), uint8(0), false)
	f.Add(uint64(2), uint8(200), uint8(3), uint8(40), true)
	f.Add(uint64(3), uint8(30), uint8(1), uint8(90), false)
	f.Add(uint64(1<<10|4|1), uint8(120), uint8(12), uint8(30), true) // drains, owners, the portable loop
	f.Add(uint64(1<<10|2), uint8(150), uint8(40), uint8(20), false)  // drains, progress timeouts
	f.Fuzz(func(t *testing.T, seed uint64, roots, bound, faults uint8, prefetch bool) {
		if seed&1 == 1 { // odd seeds: the portable loop instead of ackRun
			defer ackcore.SetAckRun(false)()
		}
		sc := acktest.FuzzScenario(seed, roots, bound, faults)
		sc.Progress = seed&2 != 0 // seeds with bit 1: progress timeouts
		factory := shardFactory
		if prefetch {
			factory = prefetchFactory // homes hashed and prefetched a chunk ahead, or ackRunFar
		}
		acktest.Run(t, sc, factory)
	})
}

// TestShardMatchesModelOwners: the owners cases (batches from several
// owners, each bounded to a few orphans) against the model, with the
// assembly loop and the portable one, for 30 seeds (6 with -short) past
// those TestShardMatchesModel runs them for with both loops (10, or 2
// with -short): seeds 11 to 40 (3 to 8), each run once; the shards must
// have refused some orphans at their owners' share, so that the bound is
// exercised, not just allowed.
func TestShardMatchesModelOwners(t *testing.T) {
	testkit.SkipUnderRace(t, "a shard on one goroutine: nothing for the race detector to watch")
	seeds, first := testkit.Size(30, 6), acktest.CaseSeeds(matchSeeds())+1
	for _, mode := range []struct {
		name string
		asm  bool
	}{{"asm", true}, {"go", false}} {
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
					sc.Seed = uint64(first + s)
					acktest.Run(t, sc, func(cfg ackcore.Config) (ackcore.Interface, error) {
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
