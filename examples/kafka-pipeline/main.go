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
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/xorack/xorack/examples/internal/kit"
	"github.com/xorack/xorack/source/kafka"
	"github.com/xorack/xorack/source/kafka/kafkatest"
	"github.com/xorack/xorack/topology"
)

// corpus: the sentences, in turn.
var corpus = kit.Sentences{"the quick brown fox jumps over the lazy dog", "a stitch in time saves nine", "the rain in spain stays mainly in the plain"}

const inTopic, outTopic, group = "sentences", "words", "kafka-pipeline"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	return kit.Example{
		Name: "kafka-pipeline",
		Defaults: kit.Defaults{Server: "brokers", Sentences: 2000, Fail: 0.01, Partitions: 4,
			FailUsage: "fraction of records whose first attempt fails after its words were emitted (replayed)"},
		Run: func(c kit.Common, stdout, stderr io.Writer) error { return pipeline(c, stdout, stderr) },
	}.Main(args, stdout, stderr)
}

// pipeline runs the pipeline; -partitions applies to the in-process
// cluster only (the topics on a real one are what they are).
func pipeline(c kit.Common, out, logw io.Writer) error {
	n := c.Sentences
	ctx, cancel := context.WithTimeout(context.Background(), c.Deadline)
	defer cancel()
	k, err := kit.StartKafka(c.Server, kafkatest.Config{Topics: []string{inTopic, outTopic}, Partitions: int32(c.Partitions)})
	if err != nil {
		return err
	}
	defer k.Close()
	if _, err := kit.Produce(ctx, k.Client, inTopic, corpus, n); err != nil {
		return err
	}
	start := time.Now()

	logger := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelError + 1}))
	sp, err := kafka.New(kafka.Config{Brokers: k.Addrs, Topics: []string{inTopic}, Group: group, Logger: logger})
	if err != nil {
		return err
	}
	sink, err := kafka.NewSink(kafka.SinkConfig{Brokers: k.Addrs, Topic: outTopic,
		Key: func(t *topology.Tuple) []byte { return []byte(t.Value(1).(string)) },
		Value: func(t *topology.Tuple) ([]byte, error) {
			return []byte(t.Value(0).(string) + " " + t.Value(1).(string)), nil
		}})
	if err != nil {
		return err
	}
	err = kit.Pipeline{
		Spout:  func() topology.Spout { return sp },
		Fields: []string{kafka.RecordField},
		Message: func(t *topology.Tuple) (string, string) {
			r := t.Value(0).(*kgo.Record)
			return fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset), string(r.Value)
		},
		Fail: c.Fail, Seed: c.Seed,
		Sink: sink.Bolt,
	}.Run(ctx, func() error { return kafka.WaitCaughtUp(ctx, k.Client, group, 20*time.Millisecond, inTopic) })
	if err := errors.Join(err, sink.Close()); err != nil {
		return err
	}
	elapsed := time.Since(start)

	// Read "words" to its end: ids seen, and the counts by distinct id.
	ids, total, err := readWords(ctx, k.Addrs)
	if err != nil {
		return err
	}
	got := map[string]int{}
	for _, w := range ids {
		got[w]++
	}
	want := corpus.Counts(n)
	st, ss := sp.Stats(), sink.Stats()
	fmt.Fprintf(out, "kafka-pipeline: %d sentences -> %d words in %q in %v; spout emitted %d, completed %d; sink produced %d, failed %d\n",
		n, len(ids), outTopic, elapsed.Round(time.Millisecond), st.Emitted, st.Completed, ss.Produced, ss.Failed)
	fmt.Fprintf(out, "duplicates: %d (records in %q written more than once by replays: at least once into Kafka)\n", total-len(ids), outTopic)
	var mismatch error
	if !maps.Equal(got, want) {
		mismatch = fmt.Errorf("word counts by distinct id differ from the sentences' (%d distinct words written, %d expected)", len(ids), kit.Sum(want))
	}
	return kit.Verdict(out, fmt.Sprintf("every expected word is in %q; counts by distinct id equal the sentences' (the %q count: %d)", outTopic, "the", got["the"]), mismatch)
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
