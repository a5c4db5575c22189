package affinity

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Assignment maps executors to CPUs.
type Assignment struct {
	// CPUs[i] is the CPU executor i should Pin to, or -1 when nothing is
	// known about the allowed CPUs and executor i should stay unpinned.
	CPUs []int
	// Shared reports that there are fewer allowed CPUs than executors, so
	// some CPU runs more than one executor and they time-slice.
	Shared bool
	// SMT reports that two executors sit on hyper-thread siblings of one
	// physical core and compete for its execution units and L1/L2 caches.
	SMT bool
	// Note says in a sentence what the assignment does and what it costs,
	// for a benchmark report.
	Note string
}

// Plan assigns executors to the allowed CPUs of topo, spreading them over
// physical cores before doubling up on hyper-thread siblings:
//
//   - the first executors get one CPU on each distinct physical core, in
//     order of the core's lowest allowed CPU;
//   - the next get the second allowed CPU of each core that has one, and so
//     on through the siblings;
//   - once every allowed CPU has an executor, the order starts over and
//     executors share CPUs (Shared).
//
// An Assignment with CPUs all -1 comes back when topo lists no allowed CPUs
// (Detect failed or the platform is not Linux). Plan never fails: a poor
// fit is described in Note, not refused. executors < 0 counts as 0.
func Plan(executors int, topo Topology) Assignment {
	return NewPlanner(topo).Take(executors)
}

// Planner hands out CPUs to several groups of threads from one spread
// order, the order Plan uses: each Take continues where the last one
// stopped, so groups taken from one Planner — an engine's executors and the
// shards of its acker — get disjoint CPUs while allowed CPUs remain, and
// share only once every allowed CPU has a thread. Plan is one Take from a
// fresh Planner.
//
// A Planner is safe for concurrent use.
type Planner struct {
	mu    sync.Mutex
	topo  Topology
	order []int
	next  int // CPUs handed out so far (order position, not wrapped)
}

// NewPlanner returns a Planner over the allowed CPUs of topo.
func NewPlanner(topo Topology) *Planner {
	return &Planner{topo: topo, order: topo.spreadOrder()}
}

// Take assigns n threads to the next n CPUs of the planner's order (see
// Plan for the order, and for what CPUs of -1 mean). Shared in the result
// reports that one of these CPUs was handed out before, by this Take or
// an earlier one. n < 0 counts as 0.
func (p *Planner) Take(n int) Assignment {
	n = max(n, 0)
	a := Assignment{CPUs: make([]int, n)}
	if n == 0 {
		a.Note = "no executors"
		return a
	}
	if len(p.order) == 0 {
		for i := range a.CPUs {
			a.CPUs[i] = -1
		}
		a.Note = plural(n, "executor") + " unpinned: no allowed CPUs known"
		return a
	}
	p.mu.Lock()
	from := p.next
	p.next += n
	p.mu.Unlock()
	for i := range a.CPUs {
		a.CPUs[i] = p.order[(from+i)%len(p.order)]
	}

	topo := p.topo
	used := slices.Clone(a.CPUs)
	slices.Sort(used)
	used = slices.Compact(used)
	perCore := map[int]int{}
	for _, cpu := range used {
		perCore[topo.coreOf(cpu)]++
	}
	a.Shared = from+n > len(p.order)
	onSharedCore := 0 // executors whose physical core holds another
	for _, k := range perCore {
		if k > 1 {
			a.SMT = true
			onSharedCore += k
		}
	}
	// Used in the planner's order (the order Plan has always reported).
	inOrder := a.CPUs[:min(n, len(p.order))]
	if from > 0 {
		inOrder = used
	}
	a.Note = a.describe(n, len(p.order), len(perCore), onSharedCore, inOrder)
	if from > 0 {
		a.Note += fmt.Sprintf(" (after %s handed out before)", plural(min(from, len(p.order)), "CPU"))
	}
	if len(topo.CPUs) == 0 {
		a.Note += " (core layout unknown: each CPU counted as a core)"
	}
	return a
}

// spreadOrder lists the allowed CPUs in the order Plan hands them out: one
// CPU per physical core, then the cores' second CPUs, and so on.
func (t Topology) spreadOrder() []int {
	allowed := slices.Clone(t.Allowed)
	slices.Sort(allowed)
	allowed = slices.Compact(allowed)

	// Group the allowed CPUs by core, cores ordered by their lowest allowed
	// CPU; allowed is sorted, so each group comes out sorted too.
	var cores [][]int
	index := map[int]int{}
	for _, cpu := range allowed {
		core := t.coreOf(cpu)
		i, ok := index[core]
		if !ok {
			i = len(cores)
			index[core] = i
			cores = append(cores, nil)
		}
		cores[i] = append(cores[i], cpu)
	}

	order := make([]int, 0, len(allowed))
	for round := 0; len(order) < len(allowed); round++ {
		for _, cpus := range cores {
			if round < len(cpus) {
				order = append(order, cpus[round])
			}
		}
	}
	return order
}

// describe writes Assignment.Note.
func (a Assignment) describe(executors, cpus, cores, onSharedCore int, used []int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s on %s (%s) on %s", plural(executors, "executor"),
		plural(len(used), "CPU"), formatCPUList(used), plural(cores, "physical core"))
	switch {
	case a.Shared:
		fmt.Fprintf(&sb, ": only %s allowed, so up to %d executors share a CPU and time-slice; figures measure contention, not parallelism",
			plural(cpus, "CPU"), (executors+cpus-1)/cpus)
	case a.SMT:
		fmt.Fprintf(&sb, ": %d share a physical core with a hyper-thread sibling", onSharedCore)
	default:
		sb.WriteString(", one per core")
	}
	return sb.String()
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
