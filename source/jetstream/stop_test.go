package jetstream

import (
	"context"
	"testing"
	"time"
)

// TestCleanStopAndRestartReprocessesNothing: the word count is stopped
// cleanly mid-run, messages in flight, and restarted on the same durable
// consumer. Stop drains (no new messages, the pending trees finish and
// are acked; what was fetched and never emitted is handed back), so no
// message is processed twice.
func TestCleanStopAndRestartReprocessesNothing(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 1000
	}
	e := newEnv(t)
	e.stream("S", n, func(i int) string { return crashCorpus[i%len(crashCorpus)] })
	e.consumer("S", ConsumerConfig("wc", 30*time.Second, 0))
	l := &wordLedger{processed: map[uint64]int{}, words: map[uint64]map[string]int{}, attempt: map[uint64]int{}}
	cfg := testTopology()
	cfg.MaxSpoutPending = 64
	scfg := Config{JetStream: e.js, Stream: "S", Consumer: "wc", FetchWait: 100 * time.Millisecond}
	p1 := start(t, cfg, scfg, 2, wordCount(l, 0, 1))
	waitFor(t, "the first pipeline mid-run", func() bool { return l.total() >= n/3 }, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p1.stopped = true
	if err := p1.top.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	st1 := p1.stats()
	stopped := p1.top.Metrics().Component("js").FailedStopped
	if done := l.total(); done >= n || stopped != 0 {
		t.Fatalf("first pipeline: %d of %d processed, %d stopped: want a mid-run stop with nothing stopped", done, n, stopped)
	}
	p2 := start(t, cfg, scfg, 2, wordCount(l, 0, 2))
	e.waitSettled("S", "wc", uint64(n))
	p2.stop(t)
	l.mu.Lock()
	defer l.mu.Unlock()
	dups := 0
	for seq := uint64(1); seq <= uint64(n); seq++ {
		switch c := l.processed[seq]; {
		case c == 0:
			t.Errorf("message %d never processed", seq)
		case c > 1:
			dups += c - 1
		}
	}
	if dups != 0 {
		t.Errorf("%d messages processed twice after a clean stop and restart", dups)
	}
	t.Logf("first pipeline %+v", st1)
}
