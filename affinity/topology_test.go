package affinity

import (
	"fmt"
	"strings"
	"testing"
)

func TestTopologyString(t *testing.T) {
	topo := smtTopology(4, 2)
	topo.Brand, topo.Vendor, topo.Hypervisor = "Test CPU 9000", "GenuineTest", "KVM"
	topo.Family, topo.Model, topo.Stepping = 6, 7, 8
	topo.CacheLine, topo.L1D, topo.L1I, topo.L2, topo.L3 = 64, 48<<10, 32<<10, 1<<20, -1
	topo.LogicalCores, topo.PhysicalCores, topo.ThreadsPerCore = 8, 4, 2
	topo.AVX2 = true
	topo.Allowed = []int{0, 1, 4, 5, 6}

	s := topo.String()
	for _, want := range []string{
		"cpu:        Test CPU 9000",
		"GenuineTest family 6 model 7 stepping 8",
		"hypervisor: KVM",
		"8 logical, 4 physical cores, 2 threads per core",
		"online 0-7; allowed 0-1,4-6 (5 CPUs on 3 physical cores)",
		"siblings 0,4 1,5",
		"L1d 48 KiB, L1i 32 KiB, L2 1 MiB, L3 n/a, line 64 B",
		"AVX2 yes, AVX-512 no",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("String() lacks %q:\n%s", want, s)
		}
	}
	sum := topo.Summary()
	if want := "Test CPU 9000 (GenuineTest 6/7/8, hypervisor KVM), 5 CPUs allowed (0-1,4-6) on 3 cores, L1d 48 KiB, L2 1 MiB, L3 n/a, line 64 B, AVX2"; sum != want {
		t.Errorf("Summary() = %q\nwant        %q", sum, want)
	}
	if strings.Contains(sum, "\n") {
		t.Errorf("Summary() spans lines: %q", sum)
	}

	// With no OS information the OS lines are left out, not shown empty.
	bare := Topology{L1D: -1, L1I: -1, L2: -1, L3: -1}
	if s := bare.String(); strings.Contains(s, "allowed") || !strings.Contains(s, "cpu:        unknown") {
		t.Errorf("String() of an empty Topology:\n%s", s)
	}
}

func ExamplePlan() {
	// 8 cores x 2 threads, numbered the x86 way (CPU n and n+8 are siblings).
	var topo Topology
	for id := range 16 {
		core := id % 8
		topo.CPUs = append(topo.CPUs, CPU{ID: id, Core: core, Siblings: []int{core, core + 8}})
		topo.Allowed = append(topo.Allowed, id)
	}
	for _, n := range []int{4, 10} {
		a := Plan(n, topo)
		fmt.Println(a.CPUs, a.SMT)
		fmt.Println(a.Note)
	}
	// Output:
	// [0 1 2 3] false
	// 4 executors on 4 CPUs (0-3) on 4 physical cores, one per core
	// [0 1 2 3 4 5 6 7 8 9] true
	// 10 executors on 10 CPUs (0-9) on 8 physical cores: 4 share a physical core with a hyper-thread sibling
}

func ExamplePlanner() {
	// 4 cores, one thread each: an engine with 2 executors and an acker
	// with 2 shards, planned from one Planner, get 4 different CPUs.
	var topo Topology
	for id := range 4 {
		topo.CPUs = append(topo.CPUs, CPU{ID: id, Core: id, Siblings: []int{id}})
		topo.Allowed = append(topo.Allowed, id)
	}
	p := NewPlanner(topo)
	shards := p.Take(2)
	executors := p.Take(2)
	fmt.Println(shards.CPUs, executors.CPUs, executors.Shared)
	fmt.Println(p.Take(1).Shared) // a fifth thread must share
	// Output:
	// [0 1] [2 3] false
	// true
}
