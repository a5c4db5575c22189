// Package perfbench reports perf's counters per operation from a Go
// benchmark, as extra columns that benchstat reads:
//
//	func BenchmarkAck(b *testing.B) {
//		... setup ...
//		stop := perfbench.Start(b)
//		for b.Loop() {
//			...
//		}
//		stop()
//	}
//
// gives, on a machine with a PMU,
//
//	BenchmarkAck  1000000  52.1 ns/op  180 cycles/op  212 instructions/op ...
//
// and in a VM without one only the software columns (task-clock-ns/op,
// context-switches/op, page-faults/op), with the reason logged once per
// process. A column the machine cannot count is left out, never reported
// as zero.
//
// It is kept apart from perf so that perf does not import "testing".
//
// # Concurrency
//
// Start and stop must run on the benchmark's goroutine; the counters
// measure its thread only. Work handed to other goroutines (b.RunParallel,
// executor goroutines) is not counted: open a perf.Group in each of them
// instead and call Report with the summed deltas.
//
// # Invariants
//
//   - Only available events are reported; unknown values are skipped.
//   - The reason for any missing column is logged once per process, not per
//     benchmark or per b.N round.
//
// The package is public for benchmarks outside the project (the project's
// own harness, ackbench, reads perf directly): Start for the common case,
// Report and Reporter for counters summed over goroutines.
package perfbench
