package ackcore_test

import "golang.org/x/sys/unix"

// threadCPU is the calling thread's CPU time in ns (CLOCK_THREAD_CPUTIME_ID),
// which, unlike the wall clock, does not run while the VM deschedules it.
func threadCPU() (int64, bool) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0, false
	}
	return ts.Nano(), true
}
