package baseline_test

import (
	"testing"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/bench/internal/baseline"
	"github.com/xorack/xorack/internal/acktest"
	"github.com/xorack/xorack/internal/testkit"
)

// factory adapts a baseline to the shared harness.
func (b impl) factory() acktest.Factory {
	return func(c ackcore.Config) (ackcore.Interface, error) { return b.make(baseline.FromShardConfig(c)) }
}

// TestMatchesModel runs the shard's differential scenarios against each
// exact baseline (GoMap, MutexMap, XsyncMap): every outcome, latency
// (within a tick) and counter must equal the reference model's, and every
// Verify pass.
func TestMatchesModel(t *testing.T) {
	forExact(t, func(t *testing.T, b impl) { acktest.RunCases(t, 20, b.factory(), nil) })
}

// forExact runs f as a subtest for each exact baseline, the ones held to
// the model. One goroutine feeds each: nothing for the race detector to
// watch, so its build skips them (the plain build runs them all).
func forExact(t *testing.T, f func(t *testing.T, b impl)) {
	testkit.SkipUnderRace(t, "one goroutine feeds each baseline: nothing for the race detector to watch")
	for _, b := range impls {
		if b.exact {
			t.Run(b.name, func(t *testing.T) { f(t, b) })
		}
	}
}

// fuzzSeeds are the exact baselines' fuzz seeds; those with bit 10 set
// fail trees after their fan-out, leaving drains (acktest.FuzzScenario).
func fuzzSeeds(f *testing.F) {
	f.Add(uint64(1), uint8(50), uint8(8), uint8(0))
	f.Add(uint64(2), uint8(200), uint8(3), uint8(40))
	f.Add(uint64(3), uint8(30), uint8(1), uint8(90))
	f.Add(uint64(1<<10|1), uint8(120), uint8(255), uint8(30))
	f.Add(uint64(1<<10|2), uint8(200), uint8(12), uint8(70))
}

// fuzzExact fuzzes one exact baseline against the model.
func fuzzExact(f *testing.F, b impl) {
	fuzzSeeds(f)
	newAcker := b.factory()
	f.Fuzz(func(t *testing.T, seed uint64, roots, bound, faults uint8) {
		acktest.Run(t, acktest.FuzzScenario(seed, roots, bound, faults), newAcker)
	})
}

// FuzzGoMap: go test -fuzz=FuzzGoMap -fuzztime=10s ./bench/internal/baseline/
func FuzzGoMap(f *testing.F) { fuzzExact(f, impls[0]) }

// FuzzXsyncMap: go test -fuzz=FuzzXsyncMap -fuzztime=10s ./bench/internal/baseline/
func FuzzXsyncMap(f *testing.F) { fuzzExact(f, impls[2]) }
