package topology

import (
	"slices"
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
// planned by one affinity.Planner, shards first: no two pinned threads
// share a CPU while CPUs remain, and once they run out every allowed CPU
// has a thread before any has two. Topology.Plan and the acker's Plan
// report it.
func TestPinOnePlanner(t *testing.T) {
	for _, tc := range []struct {
		name string
		cpus int
	}{
		{"enough", 16},
		{"short", 4},
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
			// While CPUs remain no CPU has two threads; once they run out,
			// every CPU has one before any has two.
			most, least := 0, len(all)
			for c := 1000; c < 1000+tc.cpus; c++ {
				most, least = max(most, count[c]), min(least, count[c])
			}
			if len(all) <= tc.cpus && most > 1 || len(all) > tc.cpus && (least < 1 || most-least > 1) {
				t.Errorf("shards on %v, executors on %v: threads per CPU %v over %d CPUs", shards.CPUs, execs.CPUs, count, tc.cpus)
			}
			if shards.Shared || execs.Shared != (len(all) > tc.cpus) {
				t.Errorf("Shared: shards %v, executors %v; want false, %v", shards.Shared, execs.Shared, len(all) > tc.cpus)
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
