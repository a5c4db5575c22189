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
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/xorack/xorack/examples/internal/kit"
	"github.com/xorack/xorack/source/kafka"
	"github.com/xorack/xorack/source/kafka/kafkatest"
	"github.com/xorack/xorack/topology"
)

var corpus = kit.Sentences{
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
	kit.Common
	topic string
	group string
}

// position is a record's place in its source, topic/partition@offset: the
// sink's key (with the word), what makes a write idempotent, as a row key
// in a real store.
func position(r *kgo.Record) string { return fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset) }

// Sink is the idempotent word-count store, its keys the records'
// positions.
type Sink = kit.Sink[string]

func run(args []string, stdout, stderr io.Writer) int {
	var o options
	return kit.Example{
		Name: "kafka-wordcount",
		Defaults: kit.Defaults{Server: "brokers", Sentences: 5000, Fail: 0.01, Attempts: 20, Partitions: 4,
			FailUsage: "fraction of sink writes whose ack is lost (the count bolt fails after writing; the engine replays the record)"},
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.topic, "topic", "", "topic (default: a fresh one per run)")
			fs.StringVar(&o.group, "group", "", "consumer group (default: a fresh one per run)")
		},
		Run: func(c kit.Common, stdout, stderr io.Writer) error {
			o.Common = c
			run := time.Now().UnixNano()
			if o.topic == "" {
				o.topic = fmt.Sprintf("xorack-wordcount-%d", run)
			}
			if o.group == "" {
				o.group = fmt.Sprintf("xorack-wordcount-%d", run)
			}
			return wordcountMain(o, stdout, stderr)
		},
	}.Main(args, stdout, stderr)
}

func wordcountMain(o options, out, logw io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.Deadline)
	defer cancel()
	k, err := kit.StartKafka(o.Server, kafkatest.Config{})
	if err != nil {
		return err
	}
	defer k.Close()
	if err := createTopic(ctx, k.Client, o.topic, int32(o.Partitions)); err != nil {
		return err
	}
	recs, err := kit.Produce(ctx, k.Client, o.topic, corpus, o.Sentences)
	if err != nil {
		return err
	}

	sink := kit.NewSink[string]()
	logger := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	res, err := wordcount(ctx, wcConfig{brokers: k.Addrs, topic: o.topic, group: o.group, fail: o.Fail,
		attempts: o.Attempts, seed: o.Seed, logger: logger}, sink)
	if err != nil {
		return err
	}

	got, naive := sink.Totals()
	applied, noops := sink.Writes()
	lag, err := kafka.Lag(ctx, k.Client, o.group, o.topic)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "kafka-wordcount: %d sentences in %d partitions on %s, fail %.3g: %v (%.0f records/s)\n",
		o.Sentences, o.Partitions, k.Where, o.Fail, res.elapsed.Round(time.Millisecond), float64(o.Sentences)/res.elapsed.Seconds())
	kit.PrintTop(out, got, 5)
	st := res.spout
	fmt.Fprintf(out, "spout: emitted %d, completed %d, dead-lettered %d, commits %d; engine: failed attempts %d, replayed %d\n",
		st.Emitted, st.Completed, st.DeadLettered, st.Commits, res.failedAttempts, res.replayed)
	fmt.Fprintf(out, "sink: %d records, %d writes applied, %d replayed writes changed nothing; words %d (a plain counter: %d)\n",
		sink.Records(), applied, noops, kit.Sum(got), kit.Sum(naive))

	var errs []error
	for _, r := range recs {
		if p := position(r); !sink.Has(p) {
			errs = append(errs, fmt.Errorf("record %v never processed", p))
			break
		}
	}
	if want := corpus.Counts(o.Sentences); !maps.Equal(got, want) {
		errs = append(errs, fmt.Errorf("sink totals differ from the sentences' word counts (%d words counted, %d in the sentences)", kit.Sum(got), kit.Sum(want)))
	}
	for _, l := range lag {
		if l.Lag() != 0 {
			errs = append(errs, fmt.Errorf("partition %d committed %d, end %d", l.Partition, l.Committed, l.End))
		}
	}
	if st.DeadLettered != 0 {
		errs = append(errs, fmt.Errorf("%d records dead-lettered (raise -attempts)", st.DeadLettered))
	}
	return kit.Verdict(out, "every record processed, counted exactly once in the sink, and committed", errs...)
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
}

// splitBolt emits each distinct word of a record with its count and the
// record's position.
type splitBolt struct{}

func (splitBolt) Execute(t *topology.Tuple, c *topology.BasicCollector) error {
	r := t.Value(0).(*kgo.Record)
	for _, w := range kit.Distinct(string(r.Value)) {
		if err := c.Emit(w.Word, w.N, position(r)); err != nil {
			return err
		}
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
	b := topology.NewBuilder()
	b.Spout("records", func() topology.Spout { return sp }).Output(kafka.RecordField)
	b.Bolt("split", func() topology.Bolt { return topology.Basic(splitBolt{}) }).Tasks(2).
		Input("records", topology.Shuffle()).Output("word", "n", "position")
	b.Bolt("count", kit.CountInto(sink, c.fail, c.seed, func(t *topology.Tuple) (string, string, int) {
		return t.String(2), t.String(0), t.Int(1)
	})).Tasks(2).Input("split", topology.Fields("word"))
	cfg := topology.Config{}
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
	return wcResult{elapsed: elapsed, spout: sp.Stats(), failedAttempts: m.FailedExplicit + m.FailedTimeout,
		replayed: m.Replayed}, nil
}
