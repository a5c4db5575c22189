package baseline_test

import (
	"testing"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/ackcore/acktest"
	"github.com/xorack/xorack/bench/baseline"
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
	for _, b := range impls {
		if !b.exact {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			acktest.RunCases(t, 20, b.factory(), nil)
		})
	}
}

// FuzzGoMap: go test -fuzz=FuzzGoMap -fuzztime=10s ./bench/baseline/
func FuzzGoMap(f *testing.F) {
	f.Add(uint64(1), uint8(50), uint8(8), uint8(0))
	f.Add(uint64(2), uint8(200), uint8(3), uint8(40))
	f.Add(uint64(3), uint8(30), uint8(1), uint8(90))
	newGoMap := impls[0].factory()
	f.Fuzz(func(t *testing.T, seed uint64, roots, bound, faults uint8) {
		acktest.Run(t, acktest.FuzzScenario(seed, roots, bound, faults), newGoMap)
	})
}
