package acker_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// await polls done, yielding the processor between polls, until it holds
// (nil), or until d has passed: then an error naming what was awaited
// and, from state, what is missing. The tests wait with it for what the
// acker's goroutines do (outcomes delivered, counters published), so that
// a lost outcome fails the test in d, naming what was lost, instead of
// hanging it until go test's timeout. It never sleeps: done is polled.
// The test's goroutine fails with the error; another goroutine hands it to
// the test's.
func await(d time.Duration, what string, done func() bool, state func() string) error {
	start := time.Now()
	for !done() {
		if time.Since(start) > d {
			return fmt.Errorf("%s: not within %v: %s", what, d, state())
		}
		runtime.Gosched()
	}
	return nil
}

// TestAwait: await returns nil once done holds, polling until then, and
// an error naming what it waited for and what is missing once d passes.
func TestAwait(t *testing.T) {
	polls := 0
	if err := await(time.Minute, "a third poll", func() bool { polls++; return polls == 3 }, nil); err != nil || polls != 3 {
		t.Fatalf("await: %v after %d polls, want nil after 3", err, polls)
	}
	const d = 20 * time.Millisecond
	start := time.Now()
	err := await(d, "an outcome for root 7", func() bool { return false }, func() string { return "2 of 3 outcomes" })
	if took := time.Since(start); err == nil || took < d ||
		err.Error() != "an outcome for root 7: not within 20ms: 2 of 3 outcomes" {
		t.Fatalf("await of what never happens: %v after %v", err, took)
	}
}
