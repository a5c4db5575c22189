// Package perf counts CPU and kernel events on one thread, for benchmarks
// that want cycles and cache misses per operation beside their timings, and
// says plainly when the machine will not provide them.
//
//	g, err := perf.Open()            // locks this goroutine to its thread
//	if err != nil { ... }            // only when nothing can be measured
//	defer g.Close()
//	report(perf.Probe().Note())      // what is measured, and why not more
//	before, _ := g.Read()
//	g.Start(); work(); g.Stop()
//	after, _ := g.Read()
//	d := after.Sub(before)
//	d.Get(perf.Cycles).FormatPerOp(n) // "n/a" where cycles cannot be counted
//
// Counters come from Linux perf_event_open through
// github.com/aclements/go-perfevent. The default set is cycles,
// instructions, cache-misses and branch-misses (hardware, counted by the
// CPU's PMU) and task-clock, context-switches and page-faults (software,
// counted by the kernel). The subpackage perfbench reports them per
// operation from a testing.B.
//
// # Fallbacks
//
// Machines differ in what they allow, so Probe tries each event once per
// process and settles on a mode, best first:
//
//	hardware      hardware events open (any that do not read n/a)
//	software      hardware events fail, as in most VMs: the kernel has no
//	              PMU to give them (perf_event_open fails with ENOENT)
//	thread-clock  perf_event_open itself fails (EACCES from
//	              kernel.perf_event_paranoid, EPERM from seccomp, ENOSYS):
//	              task-clock, context-switches and page-faults then come
//	              from clock_gettime(CLOCK_THREAD_CPUTIME_ID) and
//	              getrusage(RUSAGE_THREAD), which every Linux thread has
//	none          not Linux: Open returns an error wrapping
//	              errors.ErrUnsupported
//
// Status.Note puts the mode and the error that decided it in one line for
// the caller to print; the package itself prints nothing.
//
// go-perfevent leaves exclude_kernel unset, so unprivileged processes at
// perf_event_paranoid 2 (a common default) get EACCES for every event and
// land in the thread-clock mode; root, or paranoid 1 or less, gets perf's events.
// Counts then include the kernel's work on the thread's behalf.
//
// # Layout
//
// Each event has its own perf counter, opened as a group of one. Opening
// them as one group would schedule them together, but go-perfevent enables
// only a group's leader (PERF_EVENT_IOC_ENABLE without PERF_IOC_FLAG_GROUP)
// while opening members disabled, so members would count nothing and read
// as a plausible zero.
//
// A Sample is three arrays indexed by Event (raw count, nanoseconds
// enabled, nanoseconds running) and a bit set of the events measured. When
// more hardware events are open than the PMU has counters, the kernel
// rotates them and running < enabled; Get scales the count by
// enabled/running, and Sub subtracts all three arrays before scaling, so a
// phase is scaled by its own ratio rather than by the ratio since Open.
//
// # Concurrency
//
// A Group measures the thread it was opened on. Open locks the calling
// goroutine to that thread (runtime.LockOSThread) until Close, and every
// method must be called from that goroutine. Pinning the thread to a CPU is
// the caller's business (package affinity); it composes, since thread locks
// nest. A Group is not safe for concurrent use; use one per goroutine.
//
// Counts are per thread: work the Go runtime does elsewhere for this
// goroutine (background GC workers, other Ps) is not counted; GC assists and
// allocation on this goroutine are.
//
// Probe is safe for concurrent use; its result is computed once.
//
// # Invariants
//
//   - An event that cannot be counted reads as unknown (Value.OK false,
//     printed "n/a"), never as zero: the zero Value and the zero Sample are
//     unknown, and Sub keeps an event only if both sides measured it.
//   - A count is unknown, not zero, when the kernel never scheduled it.
//   - Group.Read does not allocate.
//
// # Public surface
//
// The package is public because a benchmark outside the project wants the
// same columns ackbench prints: what it exports is what such a benchmark
// calls (Open, Group, Sample, Value, the Events) and what it prints about
// the machine (Probe, Status). Queries no caller needed (the mode by
// value, which events one Group counts, one event's error) stay
// unexported: Status.Available and Note answer them.
package perf
