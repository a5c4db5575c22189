// Package affinity describes the CPUs a benchmark runs on and pins executor
// threads to them.
//
// Three pieces, usable apart:
//
//   - Detect builds a Topology: what CPUID reports (vendor, brand, caches,
//     AVX2/AVX-512) and, on Linux, which CPUs are online, which the process
//     may use (sched_getaffinity) and which of them are hyper-thread
//     siblings (sysfs). Topology.String prints it for a report.
//   - Plan maps N executors to allowed CPUs, one per physical core first.
//     A Planner does the same for several groups of threads in turn (an
//     engine's executors, then its acker's shards), so that groups planned
//     by one Planner get disjoint CPUs while allowed CPUs remain.
//   - Pin locks a goroutine to its OS thread and that thread to one CPU.
//
// Only Linux has the operating-system parts. Elsewhere Detect fills the
// CPUID fields and returns an error wrapping errors.ErrUnsupported, Pin and
// CurrentCPU return such errors, and Plan, given no allowed CPUs, leaves
// every executor unpinned and says so.
//
// # Layout
//
// Linux numbers logical CPUs; sysfs says which share a physical core
// (thread_siblings_list). Two numberings are common, and Plan handles both
// because it groups by sibling list, never by arithmetic on CPU numbers:
//
//	x86, 8 cores x 2 threads     cores  0  1  2 ...  7
//	                             CPUs  0,8 1,9 2,10 ... 7,15
//	interleaved (some arm64,     cores  0   1   2  ...  7
//	POWER, some BIOSes)          CPUs  0,1 2,3 4,5 ... 14,15
//
// A core is named by the lowest CPU on it: core_id repeats across packages,
// so it cannot tell cores apart on a multi-socket machine.
//
// Under a hypervisor CPUID describes the virtual CPU the hypervisor presents:
// one VM here reports 254 logical cores through CPUID while the guest has
// two CPUs. Topology keeps both; Plan and Pin use only the operating
// system's view.
//
// # Concurrency
//
// Detect, Plan and a Planner's Take are safe to call from any goroutine. A
// Topology and an Assignment are values; their slices are not modified
// after they are returned, so they may be shared for reading.
//
// Pin acts on the calling goroutine and its thread only, and its unpin
// function must run on that same goroutine. An executor pins itself: the
// goroutine that will run the executor loop calls Pin first.
//
// # Invariants
//
//   - Topology.Online, Topology.Allowed and every CPU.Siblings are sorted and
//     free of duplicates; every CPU.Siblings contains the CPU's own ID.
//   - Every CPU in an Assignment is in Topology.Allowed, or -1 when Allowed
//     is empty.
//   - With no more executors than allowed CPUs, no two executors share a
//     CPU; with no more executors than allowed physical cores, no two share
//     a physical core.
//   - A thread returns to the Go scheduler with the affinity mask it had
//     before Pin, or not at all: if unpin cannot restore the mask it leaves
//     the goroutine locked, and Go discards the thread when the goroutine
//     exits.
//
// # Public surface
//
// What an engine that pins its own goroutines needs: Detect and Topology
// (with its CPUs) to see the machine, Plan, Planner and Assignment to
// place executors, Pin and CurrentCPU to act. The Linux cpulist parser and
// formatter the package reads sysfs with stay inside.
package affinity
