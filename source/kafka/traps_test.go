package kafka

// One test per trap that storm-kafka-client (and franz-go) users hit,
// each against a real Kafka protocol server in the process (kfake), no
// client mocks. Faults are injected at the broker (kfake's request
// control) or in the bolts.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/xorack/xorack/internal/testkit"
	"github.com/xorack/xorack/topology"
)

var errBad = errors.New("bad record")

// holder blocks the first processing of one record until released.
type holder struct {
	at       pos
	once     sync.Once
	reached  chan struct{}
	release  chan struct{}
	heldFrom atomic.Int64 // unix ns when the hold began
}

func newHolder(at pos) *holder {
	return &holder{at: at, reached: make(chan struct{}), release: make(chan struct{})}
}

func (h *holder) hold(p pos, _ int) {
	if p != h.at {
		return
	}
	first := false
	h.once.Do(func() { first = true })
	if first {
		h.heldFrom.Store(time.Now().UnixNano())
		close(h.reached)
		<-h.release
	}
}

func (h *holder) wait(t *testing.T) {
	t.Helper()
	select {
	case <-h.reached:
	case <-time.After(testTimeout):
		t.Fatalf("record %v never reached the bolt", h.at)
	}
}

// STORM-2343, STORM-2549: one record that keeps failing stops its own
// partition's commit at itself only; the other partition commits to its
// end meanwhile; its partition reaches the cap of uncommitted records and
// pauses, and the record's retries go on while it is paused (they come
// from the engine, not from fetching); once it succeeds, the commit
// catches up and fetching resumes.
func TestFailingRecordStopsNeitherCommitsNorItsRetries(t *testing.T) {
	const topic, group, parts, n, stuckOff = "t", "g", 2, 60, 3
	c := startFilled(t, topic, parts, n)
	commits := c.logCommits(group)
	stuck := pos{topic, 0, stuckOff}
	var released atomic.Bool
	l := newLedger()
	pl := startPipeline(t, c, l, pipeOpts{
		cfg: Config{Topics: []string{topic}, Group: group, MaxUncommitted: 8},
		top: topology.Config{Retry: topology.RetryPolicy{MaxAttempts: 1 << 16, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}},
		fail: func(p pos, _ int) error {
			if p == stuck && !released.Load() {
				return errBad
			}
			return nil
		},
	})
	waitFor(t, "partition 1 committed to its end", func() bool { return c.committed(group, topic, 1) == n })
	waitFor(t, "partition 0 paused at its cap", func() bool {
		ps := pl.spout.Stats().Partitions
		return len(ps) == parts && ps[0].Paused
	})
	before := len(l.attemptsOf(stuck))
	waitFor(t, "retries of the stuck record while its partition is paused", func() bool { return len(l.attemptsOf(stuck)) >= before+3 })
	st := pl.spout.Stats()
	if p0 := st.Partitions[0]; !p0.Paused || p0.Uncommitted != 8 || p0.Committable != stuckOff {
		t.Fatalf("partition 0 while stuck: %+v", p0)
	}
	if got := c.committed(group, topic, 0); got > stuckOff {
		t.Fatalf("partition 0 committed %d, past the stuck record at %d", got, stuckOff)
	}
	seen := len(commits.all())
	released.Store(true)
	c.waitCaughtUp(t, group, topic)
	pl.stop(t)

	if dups := l.checkAll(t, topic, parts, n); dups != 0 {
		t.Errorf("%d records processed twice", dups)
	}
	for _, bc := range commits.all()[:seen] {
		if bc.partition == 0 && bc.offset > stuckOff {
			t.Errorf("the broker got a commit of partition 0 at %d while the record at %d was not done", bc.offset, stuckOff)
		}
	}
	st = pl.spout.Stats()
	if st.Pauses == 0 || st.Resumes == 0 || st.Paused != 0 || st.Partitions[0].Stats.Pauses == 0 {
		t.Errorf("pauses not counted: %+v", st)
	}
	t.Logf("stuck record: %d attempts; pauses %d, resumes %d", len(l.attemptsOf(stuck)), st.Pauses, st.Resumes)
}

// STORM-2352, STORM-2544: a record's attempt count lives until the record
// is done, through pauses, commits and other records' outcomes: a record
// that always fails gets exactly the policy's attempts, then one dead
// letter (logged at error level), and counts as done; a record that fails
// twice succeeds at its third attempt.
func TestRetryCountSurvivesUntilDone(t *testing.T) {
	const topic, dlq, group, n = "t", "dlq", "g", 30
	c := startCluster(t, 1, topic, dlq)
	c.produce(t, topic, 1, n)
	poison, flaky := pos{topic, 0, 2}, pos{topic, 0, 5}
	logs := &testkit.Logs{}
	l := newLedger()
	pl := startPipeline(t, c, l, pipeOpts{
		cfg: Config{Topics: []string{topic}, Group: group, MaxUncommitted: 4, DeadLetterTopic: dlq,
			CommitInterval: time.Millisecond, Logger: slog.New(logs)},
		top: topology.Config{Retry: topology.RetryPolicy{MaxAttempts: 4, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}},
		fail: func(p pos, attempt int) error {
			if p == poison || p == flaky && attempt < 3 {
				return fmt.Errorf("%w %v, attempt %d", errBad, p, attempt)
			}
			return nil
		},
	})
	c.waitCaughtUp(t, group, topic)
	pl.stop(t)

	if got := l.attemptsOf(poison); !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Errorf("poison record attempts %v, want [1 2 3 4]", got)
	}
	if got := l.attemptsOf(flaky); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("flaky record attempts %v, want [1 2 3]", got)
	}
	for i := range int64(n) {
		want := 1
		if i == poison.offset {
			want = 0
		}
		if got := l.count(pos{topic, 0, i}); got != want {
			t.Errorf("record %d processed %d times, want %d", i, got, want)
		}
	}
	st := pl.spout.Stats()
	if st.DeadLettered != 1 || st.Completed != n-1 || st.DeadLetterErrors != 0 || st.Pauses == 0 {
		t.Errorf("stats %+v", st)
	}
	errs := find(logs, slog.LevelError, "dead-lettered")
	if len(errs) != 1 || attr(errs[0], "offset").Int64() != poison.offset || attr(errs[0], "attempts").Int64() != 4 {
		t.Errorf("error-level dead-letter logs: %v", errs)
	}

	// The dead-letter topic holds exactly the poison record, with its origin.
	if end := c.lag(t, "none", dlq)[0].End; end != 1 {
		t.Fatalf("dead-letter topic holds %d records, want 1", end)
	}
	got := readTopic(t, c, dlq)
	if len(got) != 1 {
		t.Fatalf("read %d dead letters", len(got))
	}
	h := map[string]string{}
	for _, kv := range got[0].Headers {
		h[kv.Key] = string(kv.Value)
	}
	if string(got[0].Value) != sentence(0, 2) || h[HeaderTopic] != topic || h[HeaderPartition] != "0" || h[HeaderOffset] != "2" ||
		h[HeaderAttempts] != "4" || h[HeaderReason] != "explicit" || h[HeaderError] != "bad record "+poison.String()+", attempt 4" {
		t.Errorf("dead letter %q, headers %v", got[0].Value, h)
	}
}

// STORM-2104: outcomes for records of a revoked partition, or of an earlier
// assignment of a partition that came back, are dropped: the revocation
// commits exactly up to the lowest record not done (never past it), the
// record's late outcome changes nothing, and the partition's owner replays
// it.
func TestOutcomesOfRevokedAssignmentsAreDropped(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second bool // a second member joins (else the member rejoins alone)
	}{{"same member rejoins", false}, {"second member joins", true}} {
		t.Run(tc.name, func(t *testing.T) {
			const topic, group, n, heldOff = "t", "g", 20, 5
			c := startFilled(t, topic, 1, n)
			commits := c.logCommits(group)
			held := pos{topic, 0, heldOff}
			h := newHolder(held)
			l := newLedger()
			// No commit passes the held record before some run of it is
			// done. The held run is not done until it is released; the
			// second member's own replay of it may be done before that,
			// and then it may commit past it.
			var early struct {
				sync.Mutex
				commits []brokerCommit
			}
			commits.watch(func(bc brokerCommit) {
				if bc.offset > heldOff && l.count(held) == 0 {
					early.Lock()
					early.commits = append(early.commits, bc)
					early.Unlock()
				}
			})
			// Batch 1: a bolt publishes each input's acks before it takes
			// the next, so the records before the held one complete.
			opts := pipeOpts{cfg: Config{Topics: []string{topic}, Group: group, Opts: []kgo.Opt{eager, kgo.ClientID("member-2")}},
				hold: h.hold, top: topology.Config{Batch: 1}}
			a := startPipeline(t, c, l, opts)
			h.wait(t)
			waitFor(t, "the commit up to the held record", func() bool { return c.committed(group, topic, 0) == heldOff })
			member, gen := a.spout.Client().GroupMetadata()
			trGen := a.spout.Stats().Partitions[0].Generation

			var b *pipeline
			if tc.second {
				// The round-robin balancer gives the partition to the
				// member whose id sorts first: the second one.
				opts.cfg.Opts = []kgo.Opt{eager, kgo.ClientID("member-1")}
				b = startPipeline(t, c, l, opts)
			} else {
				a.spout.Client().ForceRebalance()
			}
			waitFor(t, "the partition reassigned", func() bool {
				if b != nil {
					return len(b.spout.owned()) == 1
				}
				p := a.spout.Stats().Partitions[0]
				return p.Owned && p.Generation != trGen && p.Generation != 0
			})
			close(h.release)
			waitFor(t, "the held record's outcome dropped", func() bool { return a.spout.Stats().Stale >= 1 })
			c.waitCaughtUp(t, group, topic)
			a.stop(t)
			if b != nil {
				b.stop(t)
			}

			for i := range int64(n) {
				got := l.count(pos{topic, 0, i})
				switch {
				case i < heldOff && got != 1:
					t.Errorf("record %d (committed before the rebalance) processed %d times, want 1", i, got)
				case i == heldOff && got != 2:
					t.Errorf("held record processed %d times, want 2 (the late one, and the owner's replay)", got)
				case i > heldOff && (got < 1 || got > 2):
					t.Errorf("record %d processed %d times, want 1 or 2", i, got)
				}
			}
			early.Lock()
			for _, bc := range early.commits {
				t.Errorf("commit at %d while the record at %d was not done: %+v", bc.offset, heldOff, bc)
			}
			early.Unlock()
			revokeAt := int64(-1)
			for _, bc := range commits.all() {
				if bc.member == member && bc.generation == gen {
					revokeAt = max(revokeAt, bc.offset)
				}
			}
			if revokeAt != heldOff {
				t.Errorf("the first assignment committed up to %d, want exactly the held record's offset %d", revokeAt, heldOff)
			}
			if st := a.spout.Stats(); st.DroppedInFlight == 0 || st.Revoked == 0 {
				t.Errorf("revocation not counted: %+v", st)
			}
		})
	}
}

// STORM-2666: on assignment the spout starts at the greater of the
// group's committed offset and its own last commit. Here the broker loses
// the spout's commits (it acknowledges them without storing them), so on
// the next rebalance the group's offset is behind what the spout knows is
// done; starting there would emit committed records again.
func TestStartsAtTheGreaterOfCommittedAndPosition(t *testing.T) {
	const topic, group = "t", "g"
	c := startFilled(t, topic, 1, 20)
	logs := &testkit.Logs{}
	l := newLedger()
	a := startPipeline(t, c, l, pipeOpts{cfg: Config{Topics: []string{topic}, Group: group, Opts: []kgo.Opt{eager}, Logger: slog.New(logs)}})
	c.waitCaughtUp(t, group, topic)

	var lose atomic.Bool
	lose.Store(true)
	kc := c.k.Cluster()
	kc.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.OffsetCommitRequest)
		if !lose.Load() || r.Group != group {
			return nil, nil, false
		}
		kc.KeepControl()
		return commitResponse(r, 0), nil, true
	})
	c.produce(t, topic, 1, 20) // offsets 20 to 39
	waitFor(t, "the spout's own commit at 40", func() bool { return a.spout.Stats().Partitions[0].Committed == 40 })
	if got := c.committed(group, topic, 0); got != 20 {
		t.Fatalf("broker holds %d, want the lost commits' predecessor 20", got)
	}
	lose.Store(false)
	trGen := a.spout.Stats().Partitions[0].Generation
	a.spout.Client().ForceRebalance()
	waitFor(t, "the partition reassigned", func() bool {
		p := a.spout.Stats().Partitions[0]
		return p.Owned && p.Generation != trGen && p.Generation != 0
	})
	c.produce(t, topic, 1, 10) // offsets 40 to 49
	c.waitCaughtUp(t, group, topic)
	a.stop(t)

	if dups := l.checkAll(t, topic, 1, 50); dups != 0 {
		t.Errorf("%d committed records emitted again", dups)
	}
	if st := a.spout.Stats(); st.StartRaised != 1 {
		t.Errorf("StartRaised %d, want 1", st.StartRaised)
	}
	w := find(logs, slog.LevelWarn, "behind this spout's own commit")
	if len(w) != 1 || attr(w[0], "group_offset").Int64() != 20 || attr(w[0], "spout_offset").Int64() != 40 {
		t.Errorf("warnings: %v", w)
	}
}

// STORM-2505: offsets missing between fetched records never hold the
// commit back: compacted away, aborted transactions and their markers, and
// records deleted below the group's committed offset. Each topic is
// committed to its end, and exactly its surviving records are processed,
// once each.
func TestGapsAreNotWaitedFor(t *testing.T) {
	const group = "g"
	const compacted, txn, deleted = "compacted", "txn", "deleted"
	c := startCluster(t, 1, deleted)
	kc := c.k.Cluster()
	if err := kc.CreateTopic(compacted, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	if err := kc.CreateTopic(txn, 1, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for i := range 30 { // one batch each; every third shares a key, and compaction keeps the last of those
		key := fmt.Appendf(nil, "u%d", i)
		if i%3 == 0 {
			key = []byte("shared")
		}
		r := &kgo.Record{Topic: compacted, Key: key, Value: []byte(sentence(0, i))}
		if err := c.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	kc.Compact()

	tx, err := kgo.NewClient(kgo.SeedBrokers(c.k.Addrs()...), kgo.TransactionalID("gaps"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	for k, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort, kgo.TryCommit} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if err := tx.ProduceSync(ctx, &kgo.Record{Topic: txn, Value: []byte(sentence(0, 5*k+i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}

	c.produce(t, deleted, 1, 20)
	commitEmptyGroup(t, c, group, deleted, 0, 5)
	if err := kc.DeleteRecords(deleted, 0, 12); err != nil {
		t.Fatal(err)
	}

	// What a read-committed reader finds, markers included.
	topics := []string{compacted, txn, deleted}
	want := map[pos]bool{}
	markers := 0
	for _, topic := range topics {
		recs := readTopic(t, c, topic)
		var offs []int64
		for _, r := range recs {
			offs = append(offs, r.Offset)
			if r.Attrs.IsControl() {
				markers++
			} else {
				want[posOf(r)] = true
			}
		}
		contiguous := offs[len(offs)-1]-offs[0]+1 == int64(len(offs))
		if contiguous && topic != deleted {
			t.Fatalf("topic %s has no gap to test: offsets %v", topic, offs)
		}
		t.Logf("%s: offsets %v", topic, offs)
	}
	if markers != 3 {
		t.Fatalf("%d transaction markers, want 3", markers)
	}

	l := newLedger()
	pl := startPipeline(t, c, l, pipeOpts{cfg: Config{Topics: topics, Group: group}})
	c.waitCaughtUp(t, group, topics...)
	pl.stop(t)

	l.mu.Lock()
	defer l.mu.Unlock()
	for p, k := range l.processed {
		if !want[p] || k != 1 {
			t.Errorf("record %v processed %d times; it survives: %v", p, k, want[p])
		}
	}
	for p := range want {
		if l.processed[p] == 0 {
			t.Errorf("surviving record %v never processed", p)
		}
	}
	if st := pl.spout.Stats(); st.Control != 3 || st.Emitted != uint64(len(want)) {
		t.Errorf("stats %+v, want 3 markers and %d records", st, len(want))
	}
}

// commitEmptyGroup commits offset for a group with no members, as an
// administrator's offset reset does.
func commitEmptyGroup(t *testing.T, c *cluster, group, topic string, partition int32, offset int64) {
	t.Helper()
	commitEmptyGroupMeta(t, c, group, topic, partition, offset, nil)
}

// commitEmptyGroupMeta is commitEmptyGroup with the commit's metadata.
func commitEmptyGroupMeta(t *testing.T, c *cluster, group, topic string, partition int32, offset int64, meta *string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for _, ti := range c.topicIDs() {
		if ti.name == topic {
			rt.TopicID = ti.id // OffsetCommit v10 names the topic by id
		}
	}
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.Metadata = partition, offset, meta
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// readTopic reads partition 0 of topic from its start to its end, read
// committed, transaction markers included.
func readTopic(t *testing.T, c *cluster, topic string) []*kgo.Record {
	t.Helper()
	end := c.lag(t, "none", topic)[0].End
	return c.readUntil(t, topic, func(got []*kgo.Record) bool { return len(got) > 0 && got[len(got)-1].Offset+1 >= end },
		kgo.KeepControlRecords(), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(20*time.Millisecond))
}

// inflightCommits is a client hook counting the offset commits on the
// wire, and the most at once.
type inflightCommits struct {
	now, most atomic.Int32
}

func (h *inflightCommits) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.OffsetCommit) && err == nil {
		n := h.now.Add(1)
		for m := h.most.Load(); n > m && !h.most.CompareAndSwap(m, n); m = h.most.Load() {
		}
	}
}

func (h *inflightCommits) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key == int16(kmsg.OffsetCommit) && e.WriteErr == nil {
		h.now.Add(-1)
	}
}

// franz-go#689: commits come from one committer per member, one at a time,
// so a late commit can never land after a later one and move an offset
// back. The broker holds one of the first member's commits until a second
// member has joined, so the revocation commit of the rebalance that
// follows meets a commit still on the wire; after that it holds every
// third commit until twenty more records are done (so a later commit
// would carry a higher offset), while both members work on the last
// quarter of the records. Still each member has at most one commit
// on the wire, and the offsets the broker applies per partition never
// decrease.
func TestCommitsAreMonotonicFromOneCommitter(t *testing.T) {
	const topic, group, parts = "t", "g", 2
	n := size(1000, 300)
	c := startFilled(t, topic, parts, n/2)
	kc := c.k.Cluster()
	var (
		done    atomic.Uint64 // records processed by either member
		armed   atomic.Bool   // hold the next commit until a second member joins
		holding atomic.Int32  // 1 while that commit is held, 2 after
		mu      sync.Mutex
		applied []brokerCommit
		seen    int
	)
	kc.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.OffsetCommitRequest)
		if r.Group != group {
			return nil, nil, false
		}
		mu.Lock()
		seen++
		slow := seen%3 == 0
		mu.Unlock()
		switch {
		case armed.Load() && holding.CompareAndSwap(0, 1):
			deadline := time.Now().Add(testTimeout)
			kc.SleepControl(func() {
				for time.Now().Before(deadline) {
					if g := kc.GroupInfo(group); g != nil && len(g.Members) == 2 {
						return
					}
					time.Sleep(time.Millisecond) // polling the condition the commit is held for
				}
			})
			holding.Store(2)
		case slow && holding.Load() == 2:
			from, deadline := done.Load(), time.Now().Add(time.Second)
			kc.SleepControl(func() {
				for done.Load() < from+20 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond) // polling the condition the commit is held for
				}
			})
		}
		mu.Lock()
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				applied = append(applied, brokerCommit{r.MemberID, r.Generation, topic, p.Partition, p.Offset})
			}
		}
		mu.Unlock()
		return nil, nil, false
	})
	l := newLedger()
	var hooks [2]inflightCommits
	pipe := func(i int) *pipeline {
		return startPipeline(t, c, l, pipeOpts{
			cfg:  Config{Topics: []string{topic}, Group: group, CommitInterval: time.Millisecond, Opts: []kgo.Opt{kgo.WithHooks(&hooks[i])}},
			hold: func(pos, int) { done.Add(1) },
		})
	}
	a := pipe(0)
	c.waitCaughtUp(t, group, topic)
	armed.Store(true)
	c.produce(t, topic, parts, n/4)
	waitFor(t, "a commit held at the broker", func() bool { return holding.Load() != 0 })
	b := pipe(1)
	waitFor(t, "the second member assigned", func() bool { return len(b.spout.owned()) > 0 })
	c.produce(t, topic, parts, n-n/2-n/4)
	c.waitCaughtUp(t, group, topic)
	a.stop(t)
	b.stop(t)

	l.checkAll(t, topic, parts, n)
	for i := range hooks {
		if m := hooks[i].most.Load(); m != 1 {
			t.Errorf("member %d had up to %d commits on the wire at once, want 1", i, m)
		}
	}
	if st := b.spout.Stats(); st.Commits == 0 {
		t.Errorf("the second member never committed: %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	last := map[int32]int64{}
	for _, bc := range applied {
		if bc.offset < last[bc.partition] {
			t.Errorf("partition %d committed back from %d to %d (%+v)", bc.partition, last[bc.partition], bc.offset, bc)
		}
		last[bc.partition] = bc.offset
	}
	for p := range int32(parts) {
		if last[p] != int64(n) {
			t.Errorf("partition %d last committed %d, want %d", p, last[p], n)
		}
	}
	t.Logf("%d partition commits applied; commit requests: %d and %d", len(applied), a.spout.Stats().Commits, b.spout.Stats().Commits)
}

// STORM-2494: processing that takes longer than the group's rebalance
// timeout is reported, not a crash. The rebalance does not wait for the
// record (the revocation commits what is done and drops the rest), the
// member stays in the group, the late outcome is counted and logged, a
// commit the broker refuses meanwhile is counted and logged, and every
// record is still processed and committed.
func TestProcessingLongerThanTheRebalanceTimeoutIsReported(t *testing.T) {
	const topic, group, n, heldOff = "t", "g", 20, 3
	const rebalanceTimeout = 200 * time.Millisecond
	c := startFilled(t, topic, 2, n)
	h := newHolder(pos{topic, 0, heldOff})
	logs := &testkit.Logs{}
	l := newLedger()
	opts := pipeOpts{
		cfg:  Config{Topics: []string{topic}, Group: group, Logger: slog.New(logs), Opts: []kgo.Opt{eager, kgo.RebalanceTimeout(rebalanceTimeout)}},
		hold: h.hold,
		// One record in flight a spout: the held one is then the only
		// record whose outcome comes after the revocation, so the first
		// (and only) late-outcome warning is its own. With more, others
		// in flight at the rebalance went stale first on a slow run and
		// took the first warning, the held one's count then not always
		// logged (at 1, 2, 4, 8...).
		top: topology.Config{Batch: 1, MaxSpoutPending: 1},
	}
	a := startPipeline(t, c, l, opts)
	h.wait(t)
	kc := c.k.Cluster()
	kc.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.OffsetCommitRequest)
		if r.Group != group {
			return nil, nil, false
		}
		return commitResponse(r, kerr.RebalanceInProgress.Code), nil, true // once
	})
	b := startPipeline(t, c, l, opts)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := kc.WaitGroupStable(ctx, group, 2); err != nil {
		t.Fatalf("the group did not rebalance while a record was held: %v", err)
	}
	select {
	case <-h.release:
		t.Fatal("released early")
	default:
	}
	waitFor(t, "processing longer than the rebalance timeout", func() bool {
		return time.Since(time.Unix(0, h.heldFrom.Load())) > rebalanceTimeout
	})
	close(h.release)
	waitFor(t, "the late outcome counted", func() bool { return a.spout.Stats().Stale >= 1 })
	c.waitCaughtUp(t, group, topic)
	if g := kc.GroupInfo(group); g == nil || len(g.Members) != 2 {
		t.Errorf("group after the late outcome: %+v, want both members", g)
	}
	a.stop(t)
	b.stop(t)

	l.checkAll(t, topic, 2, n)
	sa, sb := a.spout.Stats(), b.spout.Stats()
	if sa.CommitErrors+sb.CommitErrors == 0 {
		t.Error("the refused commit was not counted")
	}
	w := find(logs, slog.LevelWarn, "outcome for a record whose partition was revoked")
	if len(w) != 1 || attr(w[0], "age").Duration() < rebalanceTimeout || attr(w[0], "offset").Int64() != heldOff {
		t.Errorf("late-outcome warnings: %v, want one, for offset %d, at least %v old", w, heldOff, rebalanceTimeout)
	}
	if len(find(logs, slog.LevelWarn, "commit failed")) == 0 {
		t.Error("the refused commit was not logged")
	}
}

// A dead letter the broker does not take leaves its record not done: the
// partition's commit stays below it (a restart replays it), and the
// failure is counted and logged at error level.
func TestUndeliveredDeadLetterIsNotDone(t *testing.T) {
	const topic, group, n = "t", "g", 10
	poison := pos{topic, 0, 4}
	c := startFilled(t, topic, 1, n)
	logs := &testkit.Logs{}
	l := newLedger()
	pl := startPipeline(t, c, l, pipeOpts{
		cfg: Config{Topics: []string{topic}, Group: group, DeadLetterTopic: "no-such-topic", Logger: slog.New(logs),
			Opts: []kgo.Opt{kgo.UnknownTopicRetries(0)}},
		top: topology.Config{Retry: topology.RetryPolicy{MaxAttempts: 2}},
		fail: func(p pos, _ int) error {
			if p == poison {
				return errBad
			}
			return nil
		},
	})
	waitFor(t, "the dead letter refused", func() bool { return pl.spout.Stats().DeadLetterErrors == 1 })
	waitFor(t, "the commit up to the record", func() bool { return c.committed(group, topic, 0) == poison.offset })
	pl.stop(t)
	if got := c.committed(group, topic, 0); got != poison.offset {
		t.Errorf("committed %d after the stop, want %d", got, poison.offset)
	}
	if st := pl.spout.Stats(); st.DeadLettered != 0 || st.Completed != n-1 {
		t.Errorf("stats %+v", st)
	}
	if e := find(logs, slog.LevelError, "dead letter not delivered"); len(e) != 1 || attr(e[0], "offset").Int64() != poison.offset {
		t.Errorf("error logs: %v", e)
	}
}

// A commit names the generation its offsets were chosen in, not the one
// current when it goes out: a set chosen before a rebalance and sent
// after it, when one of its partitions has a new owner that committed
// further, is refused, and the new owner's commit stands. (The spout
// chooses and sends under commitMu, which a revocation waits for; a
// partition lost to fencing, which does not wait, can be chosen just
// before it is lost and sent once the member has rejoined.)
func TestCommitNamesTheGenerationItWasChosenIn(t *testing.T) {
	const topic, group, parts = "t", "g", 2
	n := size(200, 100)
	c := startFilled(t, topic, parts, n)
	l := newLedger()
	a := startPipeline(t, c, l, pipeOpts{cfg: Config{Topics: []string{topic}, Group: group, CommitInterval: time.Hour}})
	waitFor(t, "the first member done with every record", func() bool { return a.spout.Stats().Completed == uint64(parts*n) })
	a.spout.mu.Lock()
	stale := newCommitSet(a.spout.cl)
	for _, p := range a.spout.active {
		a.spout.choose(&stale, p)
	}
	a.spout.mu.Unlock()
	for p := range int32(parts) {
		if got := stale.offs[topic][p].Offset; got != int64(n) {
			t.Fatalf("the set chosen offers partition %d at %d, want %d", p, got, n)
		}
	}

	b := startPipeline(t, c, l, pipeOpts{cfg: Config{Topics: []string{topic}, Group: group, CommitInterval: time.Millisecond}})
	waitFor(t, "the second member assigned", func() bool { return len(b.spout.owned()) > 0 })
	moved := b.spout.owned()[0]
	c.produce(t, topic, parts, n)
	waitFor(t, "the new owner committed past the first member's offset", func() bool {
		return c.committed(group, topic, moved) == int64(2*n)
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	a.spout.commitMu.Lock()
	err := a.spout.send(ctx, a.spout.cl, stale)
	a.spout.commitMu.Unlock()
	if got := c.committed(group, topic, moved); got != int64(2*n) {
		t.Errorf("partition %d committed back to %d by a set chosen before the rebalance, want %d", moved, got, 2*n)
	}
	if err == nil {
		t.Errorf("the set chosen in generation %d was accepted after the rebalance", stale.gen)
	}
	a.stop(t)
	b.stop(t)
}

// A periodic commit on the wire when the spout closes is cut short (Close
// ends the committer's context) and is not counted as a commit error:
// Close commits again, and that commit lands. The broker holds the first
// commit until the spout is closing.
func TestCommitCutShortByCloseIsNotAnError(t *testing.T) {
	const topic, group = "t", "g"
	n := size(400, 200)
	c := startFilled(t, topic, 1, n)
	kc := c.k.Cluster()
	var held atomic.Bool
	release := make(chan struct{})
	kc.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if r := req.(*kmsg.OffsetCommitRequest); r.Group == group && held.CompareAndSwap(false, true) {
			kc.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	pl := startPipeline(t, c, newLedger(), pipeOpts{cfg: Config{Topics: []string{topic}, Group: group, CommitInterval: time.Millisecond}})
	waitFor(t, "the first commit held at the broker", held.Load)
	waitFor(t, "every record done", func() bool { return pl.spout.Stats().Completed == uint64(n) })
	go func() { // not the test's goroutine: no t.Fatal here
		defer close(release)
		for deadline := time.Now().Add(testTimeout); pl.spout.ctx.Err() == nil && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond) // polling the condition the commit is held for
		}
	}()
	pl.stop(t)
	if st := pl.spout.Stats(); st.CommitErrors != 0 || st.Commits == 0 {
		t.Errorf("commits %d, commit errors %d: want the cut-short one not counted", st.Commits, st.CommitErrors)
	}
	if got := c.committed(group, topic, 0); got != int64(n) {
		t.Errorf("committed %d after Close, want %d", got, n)
	}
}
