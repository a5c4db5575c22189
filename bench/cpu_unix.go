//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPU is the CPU time of the whole process so far (every thread:
// producers, executors, the collector), for the pipeline's per-message
// CPU cost, where no single thread does all the work; -1 if unknown.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
