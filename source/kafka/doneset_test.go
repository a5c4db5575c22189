package kafka

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/xorack/xorack/internal/testkit"
	"github.com/xorack/xorack/source/offsets"
	"github.com/xorack/xorack/topology"
)

// committedMeta returns the metadata the broker holds with group's commit
// of topic/partition.
func (c *cluster) committedMeta(group, topic string, partition int32) string {
	g := c.k.Cluster().GroupInfo(group)
	if g == nil {
		return ""
	}
	return g.Commits[topic][partition].Metadata
}

// crashStuck runs a pipeline over the n records of partition 0 of
// stuck's topic, every one completing but stuck, which fails for good,
// until the group's commit is at stuck with the others as its done set,
// and crashes it.
func crashStuck(t *testing.T, c *cluster, l *ledger, group string, stuck pos, n int) {
	t.Helper()
	first := startPipeline(t, c, l, pipeOpts{
		cfg: Config{Topics: []string{stuck.topic}, Group: group},
		top: topology.Config{Retry: topology.RetryPolicy{MaxAttempts: 1 << 16, Backoff: 5 * time.Millisecond, MaxBackoff: 5 * time.Millisecond}},
		fail: func(p pos, _ int) error {
			if p == stuck {
				return errBad
			}
			return nil
		},
	})
	waitFor(t, "every record but the stuck one completed, and committed as done", func() bool {
		if first.spout.Stats().Completed != uint64(n-1) || c.committed(group, stuck.topic, 0) != stuck.offset {
			return false
		}
		d, err := offsets.ParseDone(c.committedMeta(group, stuck.topic, 0))
		return err == nil && d.Floor == stuck.offset && d.Len() == int64(n-1)-stuck.offset
	})
	first.crash(t)
}

// Rule 18, STORM-2343: a record stuck in retries pins the floor while
// every record after it completes; the commit carries them as done (at
// the same offset, again as the set grows), and after a crash the next
// pipeline replays the stuck record alone: the others are fetched, counted
// in SkippedDone and not emitted.
func TestCrashReplaysOnlyWhatDidNotFinish(t *testing.T) {
	const topic, group, parts, stuckOff = "t", "g", 1, 3
	n := size(400, 200)
	c := startFilled(t, topic, parts, n)
	stuck := pos{topic, 0, stuckOff}
	l := newLedger()
	crashStuck(t, c, l, group, stuck, n)

	second := startPipeline(t, c, l, pipeOpts{cfg: Config{Topics: []string{topic}, Group: group}})
	c.waitCaughtUp(t, group, topic)
	second.stop(t)
	st := second.spout.Stats()
	if st.Emitted != 1 || st.SkippedDone != uint64(n-1-stuckOff) || st.DoneSetIgnored != 0 {
		t.Fatalf("second pipeline: emitted %d (want 1: the stuck record), skipped as done %d (want %d), ignored %d",
			st.Emitted, st.SkippedDone, n-1-stuckOff, st.DoneSetIgnored)
	}
	if got := l.count(stuck); got != 1 {
		t.Fatalf("stuck record completed %d times", got)
	}
	if dups := l.checkAll(t, topic, parts, n); dups != 0 {
		t.Errorf("%d records processed twice", dups)
	}
}

// A done set that does not fit the budget covers what fits and is
// counted; the commit is never refused for it.
func TestDoneSetOverBudgetIsCountedAndCommits(t *testing.T) {
	const topic, group, parts = "t", "g", 1
	n := size(3000, 2000)
	c := startFilled(t, topic, parts, n)
	l := newLedger()
	pl := startPipeline(t, c, l, pipeOpts{
		cfg: Config{Topics: []string{topic}, Group: group, CommitMetadataBytes: offsets.MinDoneBudget},
		top: topology.Config{Retry: topology.RetryPolicy{MaxAttempts: 1 << 16, Backoff: 5 * time.Millisecond, MaxBackoff: 5 * time.Millisecond}},
		fail: func(p pos, attempt int) error {
			if p.offset%7 == 0 && attempt < 3 || p.offset == 1 && attempt < 200 {
				return errBad
			}
			return nil
		},
	})
	c.waitCaughtUp(t, group, topic)
	pl.stop(t)
	st := pl.spout.Stats()
	if st.DoneSetTruncated == 0 || st.CommitErrors != 0 {
		t.Fatalf("truncated %d, commit errors %d: want truncations and no errors", st.DoneSetTruncated, st.CommitErrors)
	}
	if m := c.committedMeta(group, topic, 0); len(m) > offsets.MinDoneBudget {
		t.Fatalf("metadata of %d bytes over the budget %d", len(m), offsets.MinDoneBudget)
	}
}

// Foreign metadata (a member id, as franz-go commits by default) and a
// set for another offset are ignored, counted and logged; the partition
// replays from its committed offset.
func TestForeignMetadataIsIgnored(t *testing.T) {
	const topic, group, parts, n = "t", "g", 1, 50
	c := startFilled(t, topic, parts, n)
	member := "kgo-1b4e28ba-2fa1-11d2-883f-0016d3cca427" // franz-go's default metadata: the member id
	commitEmptyGroupMeta(t, c, group, topic, 0, 10, &member)
	logs := &testkit.Logs{}
	l := newLedger()
	pl := startPipeline(t, c, l, pipeOpts{cfg: Config{Topics: []string{topic}, Group: group, Logger: slog.New(logs)}})
	c.waitCaughtUp(t, group, topic)
	pl.stop(t)
	st := pl.spout.Stats()
	// Counted per read: a session may fetch the offsets more than once.
	if st.DoneSetIgnored == 0 || st.Emitted != n-10 || st.SkippedDone != 0 {
		t.Fatalf("ignored %d (want some), emitted %d (want %d), skipped %d", st.DoneSetIgnored, st.Emitted, n-10, st.SkippedDone)
	}
	ws := find(logs, slog.LevelWarn, "kafka: committed metadata is not this spout's done set")
	if len(ws) == 0 || uint64(len(ws)) != st.DoneSetIgnored {
		t.Fatalf("%d warnings for %d ignored", len(ws), st.DoneSetIgnored)
	}
	for _, w := range ws {
		if err, _ := attr(w, "err").Any().(error); !errors.Is(err, offsets.ErrForeign) {
			t.Fatalf("warning %v: want ErrForeign", w)
		}
	}
}

// A done set read back whose records retention deleted does not hold the
// commit back: the spout withholds commits until the fetch passes the
// set's top, and a fetch reset to the new log start passes it at the
// first record there (all deleted, the set's top with them) or re-reads
// what survives of the set, skipping it as done (part deleted). The
// partition is committed to its end, and only the records produced after
// the deletion, and none of the set, are emitted.
func TestDoneSetLostToRetentionCommits(t *testing.T) {
	const topic, group, stuckOff, more = "t", "g", 3, 20
	n := size(200, 100)
	for _, cut := range []struct {
		name    string
		below   int64 // DeleteRecords before this offset
		skipped uint64
	}{
		{"all", int64(n), 0},
		{"part", int64(n - 5), 5},
	} {
		t.Run(cut.name, func(t *testing.T) {
			c := startFilled(t, topic, 1, n)
			crashStuck(t, c, newLedger(), group, pos{topic, 0, stuckOff}, n)

			if err := c.k.Cluster().DeleteRecords(topic, 0, cut.below); err != nil {
				t.Fatal(err)
			}
			c.produce(t, topic, 1, more)
			second := startPipeline(t, c, newLedger(), pipeOpts{cfg: Config{Topics: []string{topic}, Group: group}})
			c.waitCaughtUp(t, group, topic)
			second.stop(t)
			if got := c.committed(group, topic, 0); got != int64(n+more) {
				t.Fatalf("committed %d, want the end %d", got, n+more)
			}
			if st := second.spout.Stats(); st.Emitted != more || st.SkippedDone != cut.skipped {
				t.Fatalf("emitted %d (want %d: those produced after the deletion), skipped as done %d (want %d)",
					st.Emitted, more, st.SkippedDone, cut.skipped)
			}
		})
	}
}
