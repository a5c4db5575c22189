// Command kafka-pipeline is topic to topic, at least once: sentences are
// produced to topic "sentences"; the Kafka spout (package source/kafka)
// emits each record as a root; a split bolt emits each word with its id
// (the record's topic, partition, offset and the word's index), then fails
// a fraction of its records on purpose after emitting (the engine replays
// the whole record); the Kafka sink bolt (kafka.Sink) writes every word to
// topic "words", keyed by the word, and acks it once the broker has it. The
// spout commits a partition only past records whose words are all in
// "words". The program then reads "words" to its end and counts the words
// by their ids: every expected word must be there; the replays' words are
// there twice (duplicates: at least once into Kafka), and the word counts
// by distinct id equal the sentences' exactly. Exit 0 when they do.
//
//	go run ./examples/kafka-pipeline                    # an in-process Kafka (kfake), 2,000 sentences, 1% replayed
//	go run ./examples/kafka-pipeline -fail 0            # no replays: 0 duplicates
//	go run ./examples/kafka-pipeline -brokers host:9092 # a real cluster (topics "sentences" and "words" must exist)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/xorack/xorack/source/kafka"
	"github.com/xorack/xorack/source/kafka/kafkatest"
	"github.com/xorack/xorack/topology"
)

// corpus: the sentences, in turn.
var corpus = []string{"the quick brown fox jumps over the lazy dog", "a stitch in time saves nine", "the rain in spain stays mainly in the plain"}

const inTopic, outTopic, group = "sentences", "words", "kafka-pipeline"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kafka-pipeline", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "", "comma-separated seed brokers; empty starts a Kafka cluster in the process")
	sentences := fs.Int("sentences", 2000, "sentences to produce")
	partitions := fs.Int("partitions", 4, "partitions of each topic (in-process cluster only)")
	fail := fs.Float64("fail", 0.01, "fraction of records whose first attempt fails after its words were emitted (replayed)")
	deadline := fs.Duration("deadline", time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *sentences < 1 || *fail < 0 || *fail >= 1 || *partitions < 1 || *partitions > kafkatest.MaxPartitions {
		fmt.Fprintln(stderr, "kafka-pipeline: want -sentences >= 1, -fail in [0, 1), -partitions in [1, 1024]")
		return 2
	}
	if err := pipeline(*brokers, *sentences, int32(*partitions), *fail, *deadline, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "kafka-pipeline:", err)
		return 1
	}
	return 0
}

func pipeline(brokers string, n int, partitions int32, fail float64, deadline time.Duration, out, logw io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	addrs := strings.Split(brokers, ",")
	if brokers == "" {
		k, err := kafkatest.Start(kafkatest.Config{Topics: []string{inTopic, outTopic}, Partitions: partitions})
		if err != nil {
			return err
		}
		defer k.Close()
		addrs = k.Addrs()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: inTopic, Value: []byte(corpus[i%len(corpus)])})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("producing the sentences: %w", err)
	}
	start := time.Now()

	logger := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelError + 1}))
	sp, err := kafka.New(kafka.Config{Brokers: addrs, Topics: []string{inTopic}, Group: group, Logger: logger})
	if err != nil {
		return err
	}
	sink, err := kafka.NewSink(kafka.SinkConfig{Brokers: addrs, Topic: outTopic,
		Key: func(t *topology.Tuple) []byte { return []byte(t.Value(1).(string)) },
		Value: func(t *topology.Tuple) ([]byte, error) {
			return []byte(t.Value(0).(string) + " " + t.Value(1).(string)), nil
		}})
	if err != nil {
		return err
	}
	seed := maphash.MakeSeed()
	b := topology.NewBuilder()
	b.Spout("sentences", func() topology.Spout { return sp }).Output(kafka.RecordField)
	b.Bolt("split", func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, c *topology.BasicCollector) error {
			r := t.Value(0).(*kgo.Record)
			id := fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)
			for i, w := range strings.Fields(string(r.Value)) {
				if err := c.Emit(fmt.Sprintf("%s/%d", id, i), w); err != nil {
					return err
				}
			}
			if t.Attempt() == 1 && float64(maphash.String(seed, id)%1_000_000) < fail*1_000_000 {
				return errors.New("lost after the words were emitted") // the engine replays the record
			}
			return nil
		}))
	}).Executors(2).Input("sentences", topology.Shuffle()).Output("id", "word")
	b.Bolt("words", sink.Bolt).Executors(4).Input("split", topology.Fields("word"))
	cfg := topology.DefaultConfig()
	cfg.Retry = topology.RetryPolicy{MaxAttempts: 10, Backoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}
	top, err := b.Build(cfg)
	if err != nil {
		return err
	}
	if err := top.Start(); err != nil {
		return err
	}
	waitErr := kafka.WaitCaughtUp(ctx, cl, group, 20*time.Millisecond, inTopic)
	if err := top.Stop(ctx); err != nil {
		return errors.Join(waitErr, err)
	}
	if err := errors.Join(waitErr, sink.Close()); err != nil {
		return err
	}
	elapsed := time.Since(start)

	// Read "words" to its end: ids seen, and the counts by distinct id.
	ids, total, err := readWords(ctx, addrs)
	if err != nil {
		return err
	}
	got := map[string]int{}
	for _, w := range ids {
		got[w]++
	}
	want := map[string]int{}
	for i := range n {
		for _, w := range strings.Fields(corpus[i%len(corpus)]) {
			want[w]++
		}
	}
	st, ss := sp.Stats(), sink.Stats()
	fmt.Fprintf(out, "kafka-pipeline: %d sentences -> %d words in %q in %v; spout emitted %d, completed %d; sink produced %d, failed %d\n",
		n, len(ids), outTopic, elapsed.Round(time.Millisecond), st.Emitted, st.Completed, ss.Produced, ss.Failed)
	fmt.Fprintf(out, "duplicates: %d (records in %q written more than once by replays: at least once into Kafka)\n", total-len(ids), outTopic)
	if !maps.Equal(got, want) {
		return fmt.Errorf("word counts by distinct id differ from the sentences' (%d distinct words written, %d expected)", len(ids), sum(want))
	}
	fmt.Fprintf(out, "every expected word is in %q; counts by distinct id equal the sentences' (the %q count: %d)\n", outTopic, "the", got["the"])
	return nil
}

// readWords reads topic "words" from its start to its end, and returns the
// word of each distinct id and the records read.
func readWords(ctx context.Context, addrs []string) (map[string]string, int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(outTopic), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		return nil, 0, err
	}
	defer cl.Close()
	lag, err := kafka.Lag(ctx, cl, "kafka-pipeline-reader", outTopic)
	if err != nil {
		return nil, 0, err
	}
	left := map[int32]int64{}
	for _, l := range lag {
		if l.End > 0 {
			left[l.Partition] = l.End
		}
	}
	ids := map[string]string{}
	total := 0
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, 0, fmt.Errorf("reading %q: %w", outTopic, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			total++
			id, w, _ := strings.Cut(string(r.Value), " ")
			ids[id] = w
			if r.Offset+1 >= left[r.Partition] {
				delete(left, r.Partition)
			}
		})
	}
	return ids, total, nil
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
