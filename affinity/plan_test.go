package affinity

import (
	"slices"
	"strings"
	"testing"
)

// smtTopology builds cores x threads CPUs numbered the x86 way: CPU c+k*cores
// is thread k of core c, so 8x2 pairs 0 with 8, 1 with 9 and so on.
func smtTopology(cores, threads int) Topology {
	var t Topology
	for id := range cores * threads {
		core := id % cores
		var sib []int
		for k := range threads {
			sib = append(sib, core+k*cores)
		}
		t.CPUs = append(t.CPUs, CPU{ID: id, Core: core, Package: 0, Siblings: sib})
		t.Online = append(t.Online, id)
	}
	t.Allowed = slices.Clone(t.Online)
	return t
}

// interleavedTopology numbers siblings adjacently: core c holds CPUs 2c, 2c+1.
func interleavedTopology(cores int) Topology {
	var t Topology
	for id := range 2 * cores {
		base := id &^ 1
		t.CPUs = append(t.CPUs, CPU{ID: id, Core: id / 2, Siblings: []int{base, base + 1}})
		t.Online = append(t.Online, id)
	}
	t.Allowed = slices.Clone(t.Online)
	return t
}

func TestPlan(t *testing.T) {
	withAllowed := func(t Topology, allowed ...int) Topology {
		t.Allowed = allowed
		return t
	}
	for _, tc := range []struct {
		name      string
		topo      Topology
		executors int
		want      []int
		shared    bool
		smt       bool
		note      string // a fragment Note must contain
	}{
		{"8x2/4", smtTopology(8, 2), 4, []int{0, 1, 2, 3}, false, false, "one per core"},
		{"8x2/8", smtTopology(8, 2), 8, []int{0, 1, 2, 3, 4, 5, 6, 7}, false, false, "on 8 physical cores"},
		{"8x2/10", smtTopology(8, 2), 10, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, false, true, "4 share a physical core"},
		{"8x2/16", smtTopology(8, 2), 16, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, false, true, "16 share"},
		{"8x2/18", smtTopology(8, 2), 18, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1}, true, true, "up to 2 executors share a CPU"},
		{"interleaved/4", interleavedTopology(4), 4, []int{0, 2, 4, 6}, false, false, "one per core"},
		{"interleaved/6", interleavedTopology(4), 6, []int{0, 2, 4, 6, 1, 3}, false, true, "4 share"},
		{"2cpus/2", smtTopology(2, 1), 2, []int{0, 1}, false, false, "one per core"},
		{"2cpus/3", smtTopology(2, 1), 3, []int{0, 1, 0}, true, false, "only 2 CPUs allowed"},
		{"1cpu/4", smtTopology(1, 1), 4, []int{0, 0, 0, 0}, true, false, "up to 4 executors share a CPU"},
		{"1cpu/1", smtTopology(1, 1), 1, []int{0}, false, false, "1 executor on 1 CPU (0) on 1 physical core"},
		// Only siblings 3 and 11 and lone threads 5, 6 of other cores allowed:
		// the cores come first, sibling 11 last.
		{"8x2/noncontiguous", withAllowed(smtTopology(8, 2), 3, 5, 6, 11), 4, []int{3, 5, 6, 11}, false, true, "2 share"},
		{"8x2/noncontiguous/3", withAllowed(smtTopology(8, 2), 3, 5, 6, 11), 3, []int{3, 5, 6}, false, false, "(3,5-6)"},
		{"8x2/siblings only", withAllowed(smtTopology(8, 2), 2, 10), 2, []int{2, 10}, false, true, "on 1 physical core"},
		// No sysfs: each allowed CPU counts as its own core.
		{"no sysfs", Topology{Allowed: []int{4, 6, 2}}, 3, []int{2, 4, 6}, false, false, "core layout unknown"},
		{"nothing known", Topology{}, 2, []int{-1, -1}, false, false, "2 executors unpinned"},
		{"zero executors", smtTopology(2, 1), 0, []int{}, false, false, "no executors"},
		{"negative executors", smtTopology(2, 1), -3, []int{}, false, false, "no executors"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Plan(tc.executors, tc.topo)
			t.Log(a.Note)
			if !slices.Equal(a.CPUs, tc.want) {
				t.Errorf("CPUs = %v, want %v", a.CPUs, tc.want)
			}
			if a.Shared != tc.shared || a.SMT != tc.smt {
				t.Errorf("Shared, SMT = %v, %v; want %v, %v", a.Shared, a.SMT, tc.shared, tc.smt)
			}
			if !strings.Contains(a.Note, tc.note) {
				t.Errorf("Note = %q, want it to contain %q", a.Note, tc.note)
			}
			checkPlanInvariants(t, tc.executors, tc.topo, a)
		})
	}
}

// checkPlanInvariants checks the package's stated Plan invariants.
func checkPlanInvariants(t *testing.T, executors int, topo Topology, a Assignment) {
	t.Helper()
	if len(a.CPUs) != max(executors, 0) {
		t.Fatalf("%d CPUs for %d executors", len(a.CPUs), executors)
	}
	cpus := map[int]bool{}
	cores := map[int]bool{}
	cpuRepeat, coreRepeat := false, false
	for _, cpu := range a.CPUs {
		if len(topo.Allowed) == 0 {
			if cpu != -1 {
				t.Errorf("CPU %d assigned with no allowed set", cpu)
			}
			continue
		}
		if !slices.Contains(topo.Allowed, cpu) {
			t.Errorf("CPU %d is not allowed (%v)", cpu, topo.Allowed)
		}
		cpuRepeat = cpuRepeat || cpus[cpu]
		coreRepeat = coreRepeat || cores[topo.coreOf(cpu)]
		cpus[cpu], cores[topo.coreOf(cpu)] = true, true
	}
	if len(topo.Allowed) == 0 {
		return
	}
	if executors <= len(topo.Allowed) && cpuRepeat {
		t.Errorf("CPU shared with %d executors and %d allowed CPUs: %v", executors, len(topo.Allowed), a.CPUs)
	}
	if executors <= topo.allowedCores() && coreRepeat {
		t.Errorf("core shared with %d executors and %d allowed cores: %v", executors, topo.allowedCores(), a.CPUs)
	}
	if a.Shared != (executors > len(topo.Allowed)) {
		t.Errorf("Shared = %v with %d executors and %d allowed CPUs", a.Shared, executors, len(topo.Allowed))
	}
}

// TestPlanExhaustive runs every executor count from 0 to three times the CPU
// count over several shapes, checking the invariants each time.
func TestPlanExhaustive(t *testing.T) {
	for _, topo := range []Topology{smtTopology(8, 2), smtTopology(4, 4), interleavedTopology(3), smtTopology(3, 1)} {
		for n := 0; n <= 3*len(topo.Allowed); n++ {
			checkPlanInvariants(t, n, topo, Plan(n, topo))
		}
	}
}

// TestPlannerDisjoint: groups taken from one Planner never share a CPU
// while allowed CPUs remain, and the group that runs past them says Shared.
func TestPlannerDisjoint(t *testing.T) {
	for _, topo := range []Topology{smtTopology(8, 2), interleavedTopology(4), smtTopology(3, 1), smtTopology(1, 1)} {
		allowed := len(topo.Allowed)
		for _, groups := range [][]int{{1, 1}, {2, 3}, {allowed / 2, allowed - allowed/2}, {allowed, 1}, {1, allowed}, {3, 3, 3}} {
			p := NewPlanner(topo)
			seen := map[int]bool{}
			total := 0
			for g, n := range groups {
				a := p.Take(n)
				total += n
				if len(a.CPUs) != n {
					t.Fatalf("%d CPUs, groups %v: Take(%d) gave %d CPUs", allowed, groups, n, len(a.CPUs))
				}
				dup := false
				for _, cpu := range a.CPUs {
					if !slices.Contains(topo.Allowed, cpu) {
						t.Errorf("%d CPUs, groups %v: group %d got CPU %d, not allowed", allowed, groups, g, cpu)
					}
					if seen[cpu] {
						dup = true
					}
					seen[cpu] = true
				}
				if total <= allowed && dup {
					t.Errorf("%d CPUs, groups %v: group %d (%v) shares a CPU with an earlier thread though only %d of %d are taken", allowed, groups, g, a.CPUs, total, allowed)
				}
				if a.Shared != (total > allowed) {
					t.Errorf("%d CPUs, groups %v: group %d Shared = %v with %d of %d taken", allowed, groups, g, a.Shared, total, allowed)
				}
			}
		}
	}
}

// TestPlannerMatchesPlan: one Take from a fresh Planner is Plan.
func TestPlannerMatchesPlan(t *testing.T) {
	topo := smtTopology(4, 2)
	for n := range 20 {
		a, b := Plan(n, topo), NewPlanner(topo).Take(n)
		if !slices.Equal(a.CPUs, b.CPUs) || a.Note != b.Note || a.Shared != b.Shared || a.SMT != b.SMT {
			t.Errorf("n=%d: Plan %+v, Take %+v", n, a, b)
		}
	}
	// Later groups continue the spread order: the second group of 2 on
	// 4 cores x 2 takes cores 2 and 3, not the first cores' siblings.
	p := NewPlanner(topo)
	p.Take(2)
	if got := p.Take(2).CPUs; !slices.Equal(got, []int{2, 3}) {
		t.Errorf("second Take(2) = %v, want [2 3]", got)
	}
}
