//go:build unix

package workerproc

import (
	"os"
	"syscall"
	"testing"
)

// A SIGTERM that arrives once the runner has started stops it, with a
// deadline.
func TestRunUntilTermStopsOnSIGTERM(t *testing.T) {
	r := &runner{start: func() error { return syscall.Kill(os.Getpid(), syscall.SIGTERM) }}
	if err := RunUntilTerm(r); err != nil || !r.stopped || !r.deadline {
		t.Fatalf("RunUntilTerm: %v, stopped %v, deadline %v; want stopped with a deadline", err, r.stopped, r.deadline)
	}
}
