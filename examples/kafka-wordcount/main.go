// Command kafka-wordcount is the word count from a Kafka topic on xorack's
// reference engine, at least once, with an exactly-once effect: sentences
// are produced to a topic, the Kafka spout (package source/kafka) emits
// each record as a root, a split bolt emits each distinct word with its
// count and the record's position, and a count bolt writes them to an
// idempotent sink keyed by (topic, partition, offset, word), then fails a
// fraction of its tuples on purpose (the write happened, its ack did not:
// the engine replays the whole record, and the sink ignores the writes it
// already has). The spout
// commits a partition only past records whose words were all written.
// The program exits 0 only if every record was processed, the sink's
// totals equal the sentences' word counts exactly (replays changed
// nothing), and the group committed every partition to its end.
//
//	go run ./examples/kafka-wordcount                          # an in-process Kafka (kfake), 5,000 sentences, 1% lost acks
//	go run ./examples/kafka-wordcount -fail 0.05 -partitions 8 # more replays, still exact
//	go run ./examples/kafka-wordcount -brokers host:9092       # a real cluster: a fresh topic and group per run
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/xorack/xorack/source/kafka"
	"github.com/xorack/xorack/source/kafka/kafkatest"
	"github.com/xorack/xorack/topology"
)

var corpus = []string{
	"a bird in the hand is worth two in the bush",
	"the early bird catches the worm",
	"many hands make light work",
	"the pen is mightier than the sword",
	"actions speak louder than words",
	"where there is smoke there is fire",
	"when in rome do as the romans do",
	"the grass is always greener on the other side",
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type options struct {
	brokers    string
	sentences  int
	partitions int
	fail       float64
	attempts   int
	topic      string
	group      string
	deadline   time.Duration
	seed       uint64
}

func run(args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("kafka-wordcount", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.brokers, "brokers", "", "comma-separated seed brokers (host:port); empty starts a Kafka cluster in the process")
	fs.IntVar(&o.sentences, "sentences", 5000, "sentences to produce and count")
	fs.IntVar(&o.partitions, "partitions", 4, "partitions of the topic")
	fs.Float64Var(&o.fail, "fail", 0.01, "fraction of sink writes whose ack is lost (the count bolt fails after writing; the engine replays the record)")
	fs.IntVar(&o.attempts, "attempts", 20, "most attempts per record before it is dead-lettered")
	fs.StringVar(&o.topic, "topic", "", "topic (default: a fresh one per run)")
	fs.StringVar(&o.group, "group", "", "consumer group (default: a fresh one per run)")
	fs.DurationVar(&o.deadline, "deadline", time.Minute, "give up after this long")
	fs.Uint64Var(&o.seed, "seed", 1, "fault injection seed")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.sentences < 1 || o.partitions < 1 || o.partitions > kafkatest.MaxPartitions || o.fail < 0 || o.fail >= 1 || o.attempts < 1 {
		fmt.Fprintf(stderr, "kafka-wordcount: want -sentences >= 1, -partitions in [1, %d], -fail in [0, 1), -attempts >= 1\n", kafkatest.MaxPartitions)
		return 2
	}
	run := time.Now().UnixNano()
	if o.topic == "" {
		o.topic = fmt.Sprintf("xorack-wordcount-%d", run)
	}
	if o.group == "" {
		o.group = fmt.Sprintf("xorack-wordcount-%d", run)
	}
	if err := wordcountMain(o, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "kafka-wordcount:", err)
		return 1
	}
	return 0
}

func wordcountMain(o options, out, logw io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.deadline)
	defer cancel()
	var addrs []string
	where := "a Kafka cluster in the process (kfake)"
	if o.brokers == "" {
		k, err := kafkatest.Start(kafkatest.Config{})
		if err != nil {
			return err
		}
		defer k.Close()
		addrs = k.Addrs()
	} else {
		addrs = strings.Split(o.brokers, ",")
		where = o.brokers
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := createTopic(ctx, cl, o.topic, int32(o.partitions)); err != nil {
		return err
	}
	positions, err := produce(ctx, cl, o.topic, o.sentences)
	if err != nil {
		return err
	}

	sink := NewSink()
	logger := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	res, err := wordcount(ctx, wcConfig{brokers: addrs, topic: o.topic, group: o.group, fail: o.fail,
		attempts: o.attempts, seed: o.seed, logger: logger}, sink)
	if err != nil {
		return err
	}

	want := wantTotals(o.sentences)
	got := sink.Totals()
	applied, noops := sink.Writes()
	lag, err := kafka.Lag(ctx, cl, o.group, o.topic)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "kafka-wordcount: %d sentences in %d partitions on %s, fail %.3g: %v (%.0f records/s)\n",
		o.sentences, o.partitions, where, o.fail, res.elapsed.Round(time.Millisecond), float64(o.sentences)/res.elapsed.Seconds())
	fmt.Fprintln(out, "top words:")
	words := slices.Collect(maps.Keys(got))
	slices.SortFunc(words, func(a, b string) int {
		if got[a] != got[b] {
			return got[b] - got[a]
		}
		return strings.Compare(a, b)
	})
	for _, w := range words[:min(5, len(words))] {
		fmt.Fprintf(out, "  %-8s %d\n", w, got[w])
	}
	st := res.spout
	fmt.Fprintf(out, "spout: emitted %d, completed %d, dead-lettered %d, commits %d; engine: failed attempts %d, replayed %d\n",
		st.Emitted, st.Completed, st.DeadLettered, st.Commits, res.failedAttempts, res.replayed)
	fmt.Fprintf(out, "sink: %d records, %d writes applied, %d replayed writes changed nothing; words %d (a plain counter: %d)\n",
		sink.Records(), applied, noops, sum(got), sum(res.naive))

	var errs []error
	for _, p := range positions {
		if !sink.Has(p) {
			errs = append(errs, fmt.Errorf("record %s/%d@%d never processed", p.Topic, p.Partition, p.Offset))
			break
		}
	}
	if !maps.Equal(got, want) {
		errs = append(errs, fmt.Errorf("sink totals differ from the sentences' word counts (%d words counted, %d in the sentences)", sum(got), sum(want)))
	}
	for _, l := range lag {
		if l.Lag() != 0 {
			errs = append(errs, fmt.Errorf("partition %d committed %d, end %d", l.Partition, l.Committed, l.End))
		}
	}
	if st.DeadLettered != 0 {
		errs = append(errs, fmt.Errorf("%d records dead-lettered (raise -attempts)", st.DeadLettered))
	}
	if len(errs) == 0 {
		fmt.Fprintln(out, "every record processed, counted exactly once in the sink, and committed")
	}
	return errors.Join(errs...)
}

// createTopic creates topic with partitions, unless it exists.
func createTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, -1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30_000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("creating topic %q: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("creating topic %q: %w", topic, err)
		}
	}
	return nil
}

// produce writes n sentences, sentence i being corpus[i % len], spread over
// the partitions, and returns their positions.
func produce(ctx context.Context, cl *kgo.Client, topic string, n int) ([]Position, error) {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Value: []byte(corpus[i%len(corpus)])}
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		return nil, fmt.Errorf("producing to %q: %w", topic, err)
	}
	var ps []Position
	for _, r := range res {
		ps = append(ps, Position{r.Record.Topic, r.Record.Partition, r.Record.Offset})
	}
	return ps, nil
}

// wantTotals is each word's count in the first n sentences.
func wantTotals(n int) map[string]int {
	w := map[string]int{}
	for i := range n {
		for _, word := range strings.Fields(corpus[i%len(corpus)]) {
			w[word]++
		}
	}
	return w
}

func sum(m map[string]int) int {
	t := 0
	for _, n := range m {
		t += n
	}
	return t
}

// wcConfig is one run of the word count.
type wcConfig struct {
	brokers  []string
	topic    string
	group    string
	fail     float64
	attempts int
	seed     uint64
	logger   *slog.Logger
}

type wcResult struct {
	elapsed                  time.Duration
	spout                    kafka.Stats
	failedAttempts, replayed uint64
	naive                    map[string]int // what a plain counter would hold: replays counted again
}

var errInjected = errors.New("injected failure after the write")

// splitBolt emits each distinct word of a record with its count and the
// record's position.
type splitBolt struct{}

func (splitBolt) Execute(t *topology.Tuple, c *topology.BasicCollector) error {
	r := t.Value(0).(*kgo.Record)
	counts := map[string]int{}
	var order []string
	for _, w := range strings.Fields(string(r.Value)) {
		if counts[w] == 0 {
			order = append(order, w)
		}
		counts[w]++
	}
	p := Position{r.Topic, r.Partition, r.Offset}
	for _, w := range order {
		if err := c.Emit(w, counts[w], p); err != nil {
			return err
		}
	}
	return nil
}

// countBolt writes each (position, word) count to the sink, adds it to a
// plain counter for comparison, and then fails a fraction of its tuples.
type countBolt struct {
	sink  *Sink
	mu    *sync.Mutex
	naive map[string]int
	fail  float64
	seed  uint64
	rng   *rand.Rand
}

func (b *countBolt) Open(ctx topology.TaskContext) error {
	b.rng = rand.New(rand.NewPCG(b.seed, uint64(ctx.Task)))
	return nil
}

func (b *countBolt) Execute(t *topology.Tuple, _ *topology.BasicCollector) error {
	w, n, p := t.String(0), t.Int(1), t.Value(2).(Position)
	b.mu.Lock()
	b.naive[w] += n
	b.mu.Unlock()
	if _, err := b.sink.Put(p, w, n); err != nil {
		return err
	}
	if b.rng.Float64() < b.fail {
		return errInjected
	}
	return nil
}

// wordcount runs the topology until the group has committed every
// partition of the topic to its end.
func wordcount(ctx context.Context, c wcConfig, sink *Sink) (wcResult, error) {
	sp, err := kafka.New(kafka.Config{
		Brokers: c.brokers, Topics: []string{c.topic}, Group: c.group,
		CommitInterval: 20 * time.Millisecond, Logger: c.logger,
	})
	if err != nil {
		return wcResult{}, err
	}
	var mu sync.Mutex
	naive := map[string]int{}
	b := topology.NewBuilder()
	b.Spout("records", func() topology.Spout { return sp }).Output(kafka.RecordField)
	b.Bolt("split", func() topology.Bolt { return topology.Basic(splitBolt{}) }).Tasks(2).
		Input("records", topology.Shuffle()).Output("word", "n", "position")
	b.Bolt("count", func() topology.Bolt {
		return topology.Basic(&countBolt{sink: sink, mu: &mu, naive: naive, fail: c.fail, seed: c.seed})
	}).Tasks(2).
		Input("split", topology.Fields("word"))
	cfg := topology.DefaultConfig()
	cfg.Retry = topology.RetryPolicy{MaxAttempts: c.attempts, Backoff: time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	// A failed record's other acks are orphans that hold acker room until
	// the message timeout: a short one keeps heavy fault rates from
	// filling the acker (roots refused, attempts burnt).
	cfg.MessageTimeout = 2 * time.Second
	top, err := b.Build(cfg)
	if err != nil {
		return wcResult{}, err
	}
	start := time.Now()
	if err := top.Start(); err != nil {
		return wcResult{}, err
	}
	waitErr := kafka.WaitCaughtUp(ctx, sp.Client(), c.group, 10*time.Millisecond, c.topic)
	elapsed := time.Since(start)
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := errors.Join(waitErr, top.Stop(stopCtx)); err != nil {
		return wcResult{}, err
	}
	m := top.Metrics().Component("records")
	mu.Lock()
	defer mu.Unlock()
	return wcResult{elapsed: elapsed, spout: sp.Stats(), failedAttempts: m.FailedExplicit + m.FailedTimeout,
		replayed: m.Replayed, naive: maps.Clone(naive)}, nil
}
