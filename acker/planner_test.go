package acker_test

import (
	"slices"
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
