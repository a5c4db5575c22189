package topology

import (
	"errors"
	"sync/atomic"
	"testing"
)

// TestErrSweepCadence: the spout executor sweeps the errors of roots no
// longer in flight once a publishEvery on its own clock, whatever the
// publishes in between: one at a full latency buffer (maxLats completions
// since the last) marks a publish done, and a spout completing that many
// a millisecond never let a sweep fall due by the publishes' clock, its
// box of errors filling with stale ones.
func TestErrSweepCadence(t *testing.T) {
	s := &spoutExec{slots: make([]slot, 1), live: make([]atomic.Uint64, 1)}
	s.top = &Topology{}
	stale := func(n int) {
		for r := range uint64(n) {
			s.errs.put(r+1, errors.New("failed by a bolt after its root ended"))
		}
	}
	stale(100)
	s.now = 5 * publishEvery
	s.lastPub = s.now // published this pass, at a full latency buffer
	s.control()
	if n := len(s.errs.m); n != 0 {
		t.Fatalf("%d stale errors kept after a pass with the last sweep %d ns before", n, s.now)
	}
	stale(100)
	s.now += publishEvery - 1
	s.control()
	if n := len(s.errs.m); n != 100 {
		t.Fatalf("%d stale errors left by a pass %d ns after the last sweep, want the 100 (not swept yet)", n, publishEvery-1)
	}
	s.now++
	s.control()
	if n := len(s.errs.m); n != 0 {
		t.Fatalf("%d stale errors kept a publishEvery after the last sweep", n)
	}
}
