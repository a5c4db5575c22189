package kafka

import (
	"context"
	"hash/maphash"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xorack/xorack/topology"
)

// failOnePercent fails about 1% of attempts, decided by a hash of the
// record's position and the attempt (so a replay draws again).
func failOnePercent(seed maphash.Seed) func(pos, int) error {
	return func(p pos, attempt int) error {
		var h maphash.Hash
		h.SetSeed(seed)
		h.WriteString(p.String())
		h.WriteByte(byte(attempt))
		if h.Sum64()%100 == 0 {
			return errBad
		}
		return nil
	}
}

// holdAfter is a pipeOpts.hold that counts attempts and blocks every one
// past the first k until gate closes.
func holdAfter(attempts *atomic.Uint64, k uint64, gate chan struct{}) func(pos, int) {
	return func(pos, int) {
		if attempts.Add(1) > k {
			<-gate
		}
	}
}

// The crash test: the word count over a topic of N records with 1% of the
// bolt's attempts failing is abandoned at a random point without a clean
// shutdown (the spout's client goes away without committing, the topology
// stops without the final commit); a new pipeline starts from the
// committed offsets. At the end every record was processed at least once
// (duplicates counted) and the committed offsets equal the end offsets.
func TestCrashAndRestart(t *testing.T) {
	const topic, group, parts = "words", "wc", 4
	n := size(500, 150) // per partition
	total := parts * n
	c := startFilled(t, topic, parts, n)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	killAt := uint64(total/4 + rng.IntN(total/4))
	t.Logf("seed %d: crash after %d of %d records", seed, killAt, total)

	l := newLedger()
	opts := pipeOpts{
		cfg:  Config{Topics: []string{topic}, Group: group},
		top:  topology.Config{Retry: topology.RetryPolicy{MaxAttempts: 20}},
		fail: failOnePercent(maphash.MakeSeed()),
	}
	// The crash point: the bolt stops taking records after killAt
	// attempts, so the pipeline is mid-run (records fetched, in flight,
	// done and not yet committed) when it is abandoned.
	gate := make(chan struct{})
	var attempts atomic.Uint64
	firstOpts := opts
	firstOpts.hold = holdAfter(&attempts, killAt, gate)
	firstOpts.cfg.CommitInterval = time.Millisecond
	first := startPipeline(t, c, l, firstOpts)
	waitFor(t, "the crash point", func() bool { return attempts.Load() > killAt })
	waitFor(t, "a commit before the crash", func() bool { return first.spout.Stats().Commits > 0 })
	first.spout.abandon()
	close(gate) // the bolts finish what they hold; their outcomes commit nothing now
	first.stopNow(t)
	atCrash := c.lag(t, group, topic)
	var committed int64
	for _, pl := range atCrash {
		committed += max(pl.Committed, 0)
	}
	st1 := first.spout.Stats()
	if st1.Completed >= uint64(total) {
		t.Fatalf("the first pipeline finished before the crash (%d records)", st1.Completed)
	}

	second := startPipeline(t, c, l, opts)
	c.waitCaughtUp(t, group, topic)
	second.stop(t)

	dups := l.checkAll(t, topic, parts, n)
	st2 := second.spout.Stats()
	t.Logf("first: completed %d, committed %d at the crash; second: emitted %d; duplicates %d",
		st1.Completed, committed, st2.Emitted, dups)
	// Everything at or above the commit was fetched again, and nothing
	// below it; what the commit's done set named was not emitted.
	if st2.Emitted+st2.SkippedDone != uint64(int64(total)-committed) {
		t.Errorf("second pipeline emitted %d records and skipped %d as done, want %d (every record at or above the commit)",
			st2.Emitted, st2.SkippedDone, int64(total)-committed)
	}
	if st1.Completed+st2.Completed < uint64(total) || st2.DeadLettered+st1.DeadLettered != 0 {
		t.Errorf("completed %d + %d of %d; dead-lettered %d", st1.Completed, st2.Completed, total, st1.DeadLettered+st2.DeadLettered)
	}
	for _, pl := range c.lag(t, group, topic) {
		if pl.Committed != pl.End || pl.End != int64(n) {
			t.Errorf("partition %d: committed %d, end %d, want %d", pl.Partition, pl.Committed, pl.End, n)
		}
	}
}

// The rebalance test: two instances in one group split the partitions;
// one stops mid-run, records in flight (a clean stop: it commits what is
// done and leaves); the other takes its partitions and nothing is lost.
func TestRebalanceAfterAnInstanceStops(t *testing.T) {
	const topic, group, parts = "words", "wc", 4
	n := size(400, 150)
	c := startFilled(t, topic, parts, n/2)
	l := newLedger()
	opts := pipeOpts{cfg: Config{Topics: []string{topic}, Group: group}}
	// The instance to stop holds its bolt after n/2 records, so it stops
	// with records in flight.
	gate := make(chan struct{})
	var aAttempts atomic.Uint64
	aOpts := opts
	aOpts.hold = holdAfter(&aAttempts, uint64(n/2), gate)
	a := startPipeline(t, c, l, aOpts)
	b := startPipeline(t, c, l, opts)
	waitFor(t, "both instances assigned", func() bool {
		return len(a.spout.owned()) > 0 && len(b.spout.owned()) > 0 && len(a.spout.owned())+len(b.spout.owned()) == parts
	})
	c.produce(t, topic, parts, n/2)
	waitFor(t, "the instance to stop mid-run", func() bool { return aAttempts.Load() > uint64(n/2) })
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // no drain: the records held are failed as stopped
		stopped <- a.top.Stop(ctx)
	}()
	waitFor(t, "records in flight failed as stopped", func() bool { return a.spout.Stats().Stopped > 0 })
	close(gate)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other instance owns every partition", func() bool { return len(b.spout.owned()) == parts })
	c.waitCaughtUp(t, group, topic)
	b.stop(t)

	dups := l.checkAll(t, topic, parts, n)
	sa, sb := a.spout.Stats(), b.spout.Stats()
	t.Logf("stopped instance: completed %d, stopped in flight %d; other: completed %d, assigned %d; duplicates %d",
		sa.Completed, sa.Stopped, sb.Completed, sb.Assigned, dups)
	if sa.Stopped == 0 || sa.Completed+sb.Completed < uint64(parts*n) {
		t.Errorf("completed %d + %d < %d", sa.Completed, sb.Completed, parts*n)
	}
}

// TestCleanStopAndRestartReprocessesNothing: the word count is stopped
// cleanly mid-run, records in flight, and restarted from the committed
// offsets. Stop drains (no new records, the pending trees finish, the
// spout commits them), so the second pipeline processes only what the
// first never did: 0 records twice.
func TestCleanStopAndRestartReprocessesNothing(t *testing.T) {
	const topic, group, parts = "words", "wc", 4
	n := size(500, 150) // per partition
	total := parts * n
	c := startFilled(t, topic, parts, n)
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
	beginDrain(first.top)
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
