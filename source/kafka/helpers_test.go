package kafka

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/xorack/xorack/internal/testkit"
	"github.com/xorack/xorack/source/kafka/kafkatest"
	"github.com/xorack/xorack/topology"
)

// testTimeout bounds each test's waits: a hang fails the test, not the
// run.
const testTimeout = 60 * time.Second

// fastGroup are client options that make rebalances take milliseconds on
// the in-process cluster: members notice a rebalance at their next
// heartbeat.
var fastGroup = []kgo.Opt{kgo.HeartbeatInterval(30 * time.Millisecond), kgo.FetchMaxWait(20 * time.Millisecond)}

// eager makes every rebalance revoke every partition (the eager protocol),
// so a test knows which partitions a rebalance takes away.
var eager = kgo.Balancers(kgo.RoundRobinBalancer())

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// cluster is an in-process Kafka cluster and a plain client to it.
type cluster struct {
	k  *kafkatest.Cluster
	cl *kgo.Client
}

func startCluster(t *testing.T, partitions int32, topics ...string) *cluster {
	t.Helper()
	return startClusterWith(t, kafkatest.Config{Topics: topics, Partitions: partitions})
}

// startFilled starts a cluster with one topic of the given partitions,
// each holding n records (produce).
func startFilled(t *testing.T, topic string, partitions int32, n int) *cluster {
	t.Helper()
	c := startCluster(t, partitions, topic)
	c.produce(t, topic, partitions, n)
	return c
}

func startClusterWith(t *testing.T, cfg kafkatest.Config) *cluster {
	t.Helper()
	k, err := kafkatest.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &cluster{k: k, cl: cl}
}

// produce writes n records to each partition of topic, valued
// "p/i: <words>", and returns the end offsets.
func (c *cluster) produce(t *testing.T, topic string, partitions int32, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var recs []*kgo.Record
	for i := range n {
		for p := range partitions {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(sentence(p, i))})
		}
	}
	if err := c.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// sentence is the value of the i-th record produced to partition p: a
// few words that depend on both.
func sentence(p int32, i int) string {
	words := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}
	n := 2 + (i+int(p))%4
	var b strings.Builder
	for j := range n {
		if j > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[(i*7+j*3+int(p))%len(words)])
	}
	return b.String()
}

// lag reads the group's lag from the brokers.
func (c *cluster) lag(t *testing.T, group string, topics ...string) []PartitionLag {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	l, err := Lag(ctx, c.cl, group, topics...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// waitCaughtUp waits until the group committed every partition to its end.
func (c *cluster) waitCaughtUp(t *testing.T, group string, topics ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := WaitCaughtUp(ctx, c.cl, group, 5*time.Millisecond, topics...); err != nil {
		t.Fatal(err)
	}
}

// size is n, or short under -short.
func size(n, short int) int {
	if testing.Short() {
		return short
	}
	return n
}

// waitFor polls cond until it holds, failing the test at the deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling a condition, with a deadline
	}
}

// pos is a record's source position.
type pos struct {
	topic     string
	partition int32
	offset    int64
}

func (p pos) String() string { return fmt.Sprintf("%s/%d@%d", p.topic, p.partition, p.offset) }

func posOf(r *kgo.Record) pos { return pos{r.Topic, r.Partition, r.Offset} }

// ledger records what the bolts saw, across pipelines: how often each
// record was processed (its bolt returned success) and each attempt.
type ledger struct {
	mu        sync.Mutex
	processed map[pos]int
	attempts  map[pos][]int
	words     map[string]int
}

func newLedger() *ledger {
	return &ledger{processed: map[pos]int{}, attempts: map[pos][]int{}, words: map[string]int{}}
}

func (l *ledger) attempt(p pos, n int) {
	l.mu.Lock()
	l.attempts[p] = append(l.attempts[p], n)
	l.mu.Unlock()
}

func (l *ledger) done(p pos, words []string) {
	l.mu.Lock()
	l.processed[p]++
	for _, w := range words {
		l.words[w]++
	}
	l.mu.Unlock()
}

func (l *ledger) count(p pos) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.processed[p]
}

func (l *ledger) attemptsOf(p pos) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.attempts[p]...)
}

// checkAll checks that every record of partitions x n was processed at
// least once and returns the duplicates.
func (l *ledger) checkAll(t *testing.T, topic string, partitions int32, n int) (dups int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for p := range partitions {
		for i := range n {
			k := l.processed[pos{topic, p, int64(i)}]
			if k == 0 {
				t.Errorf("record %v never processed", pos{topic, p, int64(i)})
			}
			dups += max(k-1, 0)
		}
	}
	return dups
}

// pipeline is one topology: the Kafka spout, a bolt that checks and
// splits each record (failing where fail says), and a counting bolt.
type pipeline struct {
	top   *topology.Topology
	spout *Spout
}

type pipeOpts struct {
	cfg   Config
	top   topology.Config
	fail  func(p pos, attempt int) error // nil: never
	hold  func(p pos, attempt int)       // called before processing; may block
	split int                            // split executors; default 1
}

func startPipeline(t *testing.T, c *cluster, l *ledger, o pipeOpts) *pipeline {
	t.Helper()
	cfg := o.cfg
	cfg.Brokers = c.k.Addrs()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	if cfg.CommitInterval == 0 {
		cfg.CommitInterval = 10 * time.Millisecond
	}
	cfg.Opts = append(append([]kgo.Opt(nil), fastGroup...), cfg.Opts...)
	sp, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var made atomic.Int32
	b := topology.NewBuilder()
	b.Spout("records", func() topology.Spout {
		if made.Add(1) > 1 {
			panic("one task only")
		}
		return sp
	}).Output(RecordField)
	split := max(o.split, 1)
	b.Bolt("split", func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(tu *topology.Tuple, col *topology.BasicCollector) error {
			r := tu.Value(0).(*kgo.Record)
			p := posOf(r)
			l.attempt(p, tu.Attempt())
			if o.hold != nil {
				o.hold(p, tu.Attempt())
			}
			if o.fail != nil {
				if err := o.fail(p, tu.Attempt()); err != nil {
					return err
				}
			}
			words := strings.Fields(string(r.Value))
			for _, w := range words {
				if err := col.Emit(w); err != nil {
					return err
				}
			}
			l.done(p, words)
			return nil
		}))
	}).Executors(split).Tasks(split).Input("records", topology.Shuffle()).Output("word")
	b.Bolt("count", func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(*topology.Tuple, *topology.BasicCollector) error { return nil }))
	}).Input("split", topology.Fields("word"))
	tc := o.top
	if tc.Retry.Backoff == 0 {
		tc.Retry.Backoff = time.Millisecond
		tc.Retry.MaxBackoff = 5 * time.Millisecond
	}
	if tc.MessageTimeout == 0 {
		tc.MessageTimeout = 30 * time.Second
	}
	top, err := b.Build(tc)
	if err != nil {
		t.Fatal(err)
	}
	if err := top.Start(); err != nil {
		t.Fatal(err)
	}
	pl := &pipeline{top: top, spout: sp}
	return pl
}

// stop stops the topology cleanly: the spout commits what is done and
// leaves the group.
func (pl *pipeline) stop(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := pl.top.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// stopNow stops the pipeline without the drain (an ended context): what
// is in flight is failed as stopped.
func (pl *pipeline) stopNow(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := pl.top.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// crash abandons the pipeline without a clean shutdown: the spout's client
// goes away without committing (its group callbacks do nothing any more),
// then the topology stops; the spout's Close finds it abandoned and
// commits nothing.
func (pl *pipeline) crash(t *testing.T) {
	t.Helper()
	pl.spout.abandon()
	pl.stopNow(t)
}

// owned returns the partitions the spout owns now.
func (s *Spout) owned() []int32 {
	var ps []int32
	for _, p := range s.Stats().Partitions {
		if p.Owned {
			ps = append(ps, p.Partition)
		}
	}
	return ps
}

// abandon is a crash: the client goes away without a commit, and every
// callback after it does nothing.
func (s *Spout) abandon() {
	s.crashed.Store(true)
	s.stopBackground()
	s.cl.Close()
}

// find returns the records at level whose message contains msg.
func find(logs *testkit.Logs, level slog.Level, msg string) []slog.Record {
	var out []slog.Record
	for _, r := range logs.Records() {
		if r.Level == level && strings.Contains(r.Message, msg) {
			out = append(out, r)
		}
	}
	return out
}

// attr returns the record's attribute named key.
func attr(r slog.Record, key string) slog.Value {
	var v slog.Value
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value
			return false
		}
		return true
	})
	return v
}

// brokerCommit is one offset commit as the broker received it.
type brokerCommit struct {
	member     string
	generation int32
	topic      string
	partition  int32
	offset     int64
}

// commitLog records, in the broker's order, every offset commit of group
// the cluster receives; the cluster then handles the request as usual.
type commitLog struct {
	mu      sync.Mutex
	commits []brokerCommit
	ids     map[[16]byte]string
	onEach  func(brokerCommit) // called as the broker takes each commit, under mu
}

// watch calls f for each commit the broker takes from now on, as it takes
// it (before the member hears back), so f can check what is done then.
func (l *commitLog) watch(f func(brokerCommit)) {
	l.mu.Lock()
	l.onEach = f
	l.mu.Unlock()
}

func (c *cluster) logCommits(group string) *commitLog {
	cl := &commitLog{ids: map[[16]byte]string{}}
	for _, ti := range c.topicIDs() {
		cl.ids[ti.id] = ti.name
	}
	c.k.Cluster().ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.OffsetCommitRequest)
		if r.Group != group {
			return nil, nil, false
		}
		cl.mu.Lock()
		defer cl.mu.Unlock()
		for _, t := range r.Topics {
			name := t.Topic
			if name == "" {
				name = cl.ids[t.TopicID]
			}
			for _, p := range t.Partitions {
				bc := brokerCommit{r.MemberID, r.Generation, name, p.Partition, p.Offset}
				cl.commits = append(cl.commits, bc)
				if cl.onEach != nil {
					cl.onEach(bc)
				}
			}
		}
		return nil, nil, false
	})
	return cl
}

func (l *commitLog) all() []brokerCommit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]brokerCommit(nil), l.commits...)
}

type topicID struct {
	name string
	id   [16]byte
}

// topicIDs returns the cluster's topics and their ids (OffsetCommit v10
// names topics by id).
func (c *cluster) topicIDs() []topicID {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		panic(err)
	}
	var out []topicID
	for _, t := range resp.Topics {
		if t.Topic != nil {
			out = append(out, topicID{*t.Topic, t.TopicID})
		}
	}
	return out
}

// commitResponse answers an OffsetCommit without applying it, with code
// for every partition (0: success).
func commitResponse(req *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// committed returns the group's committed offsets as the broker holds
// them (-1 where none).
func (c *cluster) committed(group, topic string, partition int32) int64 {
	g := c.k.Cluster().GroupInfo(group)
	if g == nil {
		return -1
	}
	if pc, ok := g.Commits[topic][partition]; ok {
		return pc.Offset
	}
	return -1
}

// sinkTopology builds sp into a topology whose one bolt takes every
// record and does nothing with it.
func sinkTopology(t *testing.T, sp *Spout, cfg topology.Config) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder()
	b.Spout("records", func() topology.Spout { return sp }).Output(RecordField)
	b.Bolt("sink", func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(*topology.Tuple, *topology.BasicCollector) error { return nil }))
	}).Input("records", topology.Shuffle())
	top, err := b.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// readUntil reads topic from its start, with a client of its own made
// with opts, until enough says the records read are enough, failing the
// test at the deadline.
func (c *cluster) readUntil(t *testing.T, topic string, enough func([]*kgo.Record) bool, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.k.Addrs()...), kgo.ConsumeTopics(topic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var got []*kgo.Record
	for !enough(got) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d records of %q: %v", len(got), topic, err)
		}
		got = append(got, fs.Records()...)
	}
	return got
}

// beginDrain makes top stop asking its spouts for tuples now (Drain with
// an ended context sets the drain and returns at once), so that a test
// that then stops top and releases its held bolts has the stop begin
// mid-run: a Stop started on a goroutine might otherwise begin its drain
// only after the released trees and the rest of the input are done.
func beginDrain(top *topology.Topology) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = top.Drain(ctx)
}
