package topology

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/affinity"
)

// fakeCPUs is a machine whose allowed CPUs are first..first+n-1, each its
// own core. Numbers from 1000 up are on no machine here, so the threads
// planned on them fail to pin and run unpinned: the test reads the plans
// without pinning anything for real.
func fakeCPUs(first, n int) func() (affinity.Topology, error) {
	var topo affinity.Topology
	for c := first; c < first+n; c++ {
		topo.Allowed = append(topo.Allowed, c)
	}
	return func() (affinity.Topology, error) { return topo, nil }
}

// TestPinOnePlanner: with Pin, the acker's shards and the executors are
// planned by one affinity.Planner, shards first, no two pinned threads on
// one CPU; where they outnumber the allowed CPUs nothing is pinned, and
// the Note of Topology.Plan says why. Topology.Plan and the acker's Plan
// report it.
func TestPinOnePlanner(t *testing.T) {
	for _, tc := range []struct {
		name string
		cpus int
	}{
		{"enough", 16},
		{"exact", 7},
		{"short", 6},
		{"few", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 200
			l, b, ids := idSource(n)
			ids.Tasks(2).Executors(2)
			b.Bolt("sink", func() Bolt { return nopBolt{} }).Tasks(3).Executors(3).Input("ids", Shuffle())
			cfg := testConfig()
			cfg.Acker.Shards = 2
			cfg.Pin = true
			top, err := b.Build(cfg)
			if err != nil {
				t.Fatal(err)
			}
			top.detect = fakeCPUs(1000, tc.cpus)
			a := runPinned(t, top)
			shards, execs := a.Plan(), top.Plan()
			l.check(t, n, false)

			if tc.cpus < 7 {
				if len(shards.CPUs) != 0 || len(execs.CPUs) != 0 {
					t.Errorf("7 threads on %d CPUs: shards planned on %v, executors on %v; want none pinned", tc.cpus, shards.CPUs, execs.CPUs)
				}
				want := fmt.Sprintf("unpinned: 7 threads to pin (2 acker shards, 5 executors) and %d allowed CPUs", tc.cpus)
				if !strings.HasPrefix(execs.Note, want) {
					t.Errorf("the plan's note is %q, want it to start %q", execs.Note, want)
				}
				return
			}
			if len(shards.CPUs) != 2 || len(execs.CPUs) != 5 {
				t.Fatalf("plans of %d shards and %d executors, want 2 and 5", len(shards.CPUs), len(execs.CPUs))
			}
			all := append(slices.Clone(shards.CPUs), execs.CPUs...)
			count := map[int]int{}
			for _, c := range all {
				if c < 1000 || c >= 1000+tc.cpus {
					t.Errorf("CPU %d planned, not among the allowed 1000-%d", c, 1000+tc.cpus-1)
				}
				count[c]++
			}
			for c, k := range count {
				if k > 1 {
					t.Errorf("shards on %v, executors on %v: %d threads on CPU %d", shards.CPUs, execs.CPUs, k, c)
				}
			}
			if shards.Shared || execs.Shared {
				t.Errorf("Shared: shards %v, executors %v; want false", shards.Shared, execs.Shared)
			}
		})
	}
}

// TestPinAckerOnly: Acker.Pin without Config.Pin pins the shards alone,
// from the planner's first CPUs; the executors stay unplanned.
func TestPinAckerOnly(t *testing.T) {
	const n = 100
	l, b := idsToSink(n)
	cfg := testConfig()
	cfg.Acker = acker.Config{Shards: 2, Pin: true}
	top, err := b.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	top.detect = fakeCPUs(1000, 8)
	a := runPinned(t, top)
	l.check(t, n, false)
	if got := a.Plan().CPUs; !slices.Equal(got, []int{1000, 1001}) {
		t.Errorf("shards on %v, want [1000 1001]", got)
	}
	if got := top.Plan().CPUs; len(got) != 0 {
		t.Errorf("executors planned on %v without Config.Pin", got)
	}
}

// runPinned starts top, waits for its spout to finish, stops it, and
// returns its acker (whose Plan, like top's, outlives the stop).
func runPinned(t *testing.T, top *Topology) *acker.Acker {
	t.Helper()
	if err := top.Start(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, top, 30*time.Second)
	top.mu.Lock()
	a := top.port.(*acker.Acker)
	top.mu.Unlock()
	stop(t, top)
	return a
}
