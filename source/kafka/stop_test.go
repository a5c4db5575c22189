package kafka

import (
	"context"
	"sync/atomic"
	"testing"
)

// TestCleanStopAndRestartReprocessesNothing: the word count is stopped
// cleanly mid-run, records in flight, and restarted from the committed
// offsets. Stop drains (no new records, the pending trees finish, the
// spout commits them), so the second pipeline processes only what the
// first never did: 0 records twice.
func TestCleanStopAndRestartReprocessesNothing(t *testing.T) {
	const topic, group, parts = "words", "wc", 4
	n := size(500, 150) // per partition
	total := parts * n
	c := startCluster(t, parts, topic)
	c.produce(t, topic, parts, n)
	l := newLedger()
	opts := pipeOpts{cfg: Config{Topics: []string{topic}, Group: group}}
	opts.top.MaxSpoutPending = 32
	gate := make(chan struct{})
	var attempts atomic.Uint64
	firstOpts := opts
	firstOpts.hold = holdAfter(&attempts, uint64(total/3), gate)
	first := startPipeline(t, c, l, firstOpts)
	waitFor(t, "the first pipeline mid-run, its pending window full", func() bool {
		m := first.top.Metrics()
		return attempts.Load() > uint64(total/3) && m.Component("records").Pending == 32
	})
	stopped := make(chan error)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		stopped <- first.top.Stop(ctx)
	}()
	close(gate) // the trees in flight finish during the drain
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	st1 := first.spout.Stats()
	sp := first.top.Metrics().Component("records")
	if st1.Completed >= uint64(total) || sp.FailedStopped != 0 {
		t.Fatalf("first pipeline: completed %d of %d, %d stopped: want a mid-run stop with nothing stopped", st1.Completed, total, sp.FailedStopped)
	}
	second := startPipeline(t, c, l, opts)
	c.waitCaughtUp(t, group, topic)
	second.stop(t)
	st2 := second.spout.Stats()
	if dups := l.checkAll(t, topic, parts, n); dups != 0 || st2.Emitted != uint64(total)-st1.Completed {
		t.Errorf("%d records processed twice; second pipeline emitted %d, want %d (what the first did not complete)",
			dups, st2.Emitted, uint64(total)-st1.Completed)
	}
	t.Logf("first: completed %d; second: emitted %d", st1.Completed, st2.Emitted)
}
