package topology

import (
	"context"
	"testing"
	"time"
)

// TestStopDrains: Stop stops asking the spout for messages and waits for
// the pending trees; with a context long enough, nothing is reported
// stopped and nothing emitted is left to reprocess.
func TestStopDrains(t *testing.T) {
	l := newLedger()
	gate := make(chan struct{})
	top, sp := gatedTopology(t, l, gate, nil)
	waitFor(t, 20*time.Second, "a full pending window", func() bool { return sp().Pending == 200 })
	emitted := int(sp().Emitted) // the bolt is held: nothing completes, Next is not called
	stopped := make(chan error)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stopped <- top.Stop(ctx)
	}()
	waitFor(t, 20*time.Second, "the drain to begin", top.draining.Load)
	close(gate) // the pending trees finish (every seventh after a replay)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	c := sp()
	if int(c.Emitted) != emitted {
		t.Errorf("emitted %d, %d when the stop began: Next was called during the drain", c.Emitted, emitted)
	}
	s := l.check(t, emitted, false)
	if s.completed != emitted || c.FailedStopped != 0 || c.Pending != 0 {
		t.Errorf("completed %d of %d, %d stopped, %d pending", s.completed, emitted, c.FailedStopped, c.Pending)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range emitted {
		if l.processed[id] != 1 {
			t.Errorf("msg %d processed %d times", id, l.processed[id])
		}
	}
}
