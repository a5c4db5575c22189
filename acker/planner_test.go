package acker_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/affinity"
)

// TestPlanner: with Pin and a Planner, New takes the shards' CPUs from
// the Planner, after what it handed out before and before what it hands
// out next; CPUs no machine has (1000 and up) keep the executors from
// pinning anything for real.
func TestPlanner(t *testing.T) {
	topo := affinity.Topology{Allowed: []int{1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007}}
	pl := affinity.NewPlanner(topo)
	before := pl.Take(2)
	a, err := acker.New(acker.Config{Shards: 3, Spec: acker.Spec{Producers: 1, Tasks: 1}, Pin: true, Planner: pl,
		Shard: ackcore.Config{MaxPending: 16}})
	if err != nil {
		t.Fatal(err)
	}
	after := pl.Take(3)
	got := a.Plan().CPUs
	if want := []int{1002, 1003, 1004}; !slices.Equal(got, want) {
		t.Errorf("shards' CPUs %v, want %v (the planner's after %v)", got, want, before.CPUs)
	}
	if want := []int{1005, 1006, 1007}; !slices.Equal(after.CPUs, want) {
		t.Errorf("the next Take got %v, want %v", after.CPUs, want)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	a.Stop()

	// Without Pin the Planner is not used.
	pl = affinity.NewPlanner(topo)
	if _, err := acker.New(acker.Config{Shards: 3, Spec: acker.Spec{Producers: 1, Tasks: 1}, Planner: pl,
		Shard: ackcore.Config{MaxPending: 16}}); err != nil {
		t.Fatal(err)
	}
	if got := pl.Take(1).CPUs; !slices.Equal(got, []int{1000}) {
		t.Errorf("unpinned acker took CPUs from the planner: the next Take got %v", got)
	}
}

// TestPlannerTooFewCPUs: where the Planner has fewer CPUs left than the
// acker has shards, New pins none of them (pinned threads sharing a CPU
// run slower than unpinned ones) and Plan's note says so; with enough
// left, each shard gets a CPU of its own.
func TestPlannerTooFewCPUs(t *testing.T) {
	topo := affinity.Topology{Allowed: []int{1000, 1001, 1002}}
	for _, tc := range []struct {
		taken, shards int
		want          []int
	}{
		{0, 3, []int{1000, 1001, 1002}},
		{0, 4, nil},
		{1, 2, []int{1001, 1002}},
		{1, 3, nil},
	} {
		pl := affinity.NewPlanner(topo)
		pl.Take(tc.taken)
		a, err := acker.New(acker.Config{Shards: tc.shards, Spec: acker.Spec{Producers: 1, Tasks: 1}, Pin: true, Planner: pl,
			Shard: ackcore.Config{MaxPending: 16}})
		if err != nil {
			t.Fatal(err)
		}
		p := a.Plan()
		if !slices.Equal(p.CPUs, tc.want) {
			t.Errorf("%d shards, %d of 3 CPUs taken before: planned on %v, want %v", tc.shards, tc.taken, p.CPUs, tc.want)
		}
		if unpinned := strings.HasPrefix(p.Note, "unpinned: "); unpinned != (tc.want == nil) {
			t.Errorf("%d shards, %d of 3 CPUs taken before: note %q", tc.shards, tc.taken, p.Note)
		}
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		a.Stop()
	}
}
