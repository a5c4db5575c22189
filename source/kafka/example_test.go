package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/xorack/xorack/source/kafka"
	"github.com/xorack/xorack/source/kafka/kafkatest"
	"github.com/xorack/xorack/topology"
)

// produce writes the sentences to topic (an in-process cluster here; any
// Kafka cluster the same way).
func produce(addrs []string, topic string, sentences ...string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for _, s := range sentences {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(s)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		panic(err)
	}
}

// firstRecord reads topic's first record.
func firstRecord(addrs []string, topic string) *kgo.Record {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return cl.PollFetches(ctx).Records()[0]
}

// runToEnd builds and starts the topology, waits until the spout's group
// has committed every partition of topic to its end, and stops it (the
// spout commits what is done and leaves the group).
func runToEnd(b *topology.Builder, cfg topology.Config, sp *kafka.Spout, group, topic string) {
	top, err := b.Build(cfg)
	if err != nil {
		panic(err)
	}
	if err := top.Start(); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kafka.WaitCaughtUp(ctx, sp.Client(), group, 5*time.Millisecond, topic); err != nil {
		panic(err)
	}
	if err := top.Stop(ctx); err != nil {
		panic(err)
	}
}

// splitRecord splits a record's value into words, anchored to the record.
func splitRecord(t *topology.Tuple, c *topology.BasicCollector) error {
	r := t.Value(0).(*kgo.Record)
	for _, w := range strings.Fields(string(r.Value)) {
		if err := c.Emit(w); err != nil {
			return err
		}
	}
	return nil
}

// The word count from a Kafka topic, at least once: each record is a
// root; the spout commits a partition's offset only past records whose
// words were all counted; the run ends when the group has committed every
// partition to its end.
func Example() {
	k, err := kafkatest.Start(kafkatest.Config{Topics: []string{"sentences"}, Partitions: 2})
	if err != nil {
		panic(err)
	}
	defer k.Close()
	produce(k.Addrs(), "sentences", "the cow jumped over the moon", "the man went to the store", "over the moon")

	sp, err := kafka.New(kafka.Config{
		Brokers: k.Addrs(), Topics: []string{"sentences"}, Group: "wordcount",
		CommitInterval: 10 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	counts := map[string]int{}
	b := topology.NewBuilder()
	b.Spout("records", func() topology.Spout { return sp }).Output(kafka.RecordField)
	b.Bolt("split", func() topology.Bolt { return topology.Basic(topology.BasicFunc(splitRecord)) }).
		Input("records", topology.Shuffle()).Output("word")
	b.Bolt("count", func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, _ *topology.BasicCollector) error {
			mu.Lock()
			counts[t.String(0)]++
			mu.Unlock()
			return nil
		}))
	}).Input("split", topology.Fields("word"))
	runToEnd(b, topology.Config{}, sp, "wordcount", "sentences")
	st := sp.Stats()
	fmt.Println("records completed:", st.Completed)
	fmt.Println("the:", counts["the"], "moon:", counts["moon"])
	// Output:
	// records completed: 3
	// the: 5 moon: 2
}

// A record that fails every attempt the engine's retry policy allows goes
// to the dead-letter topic, with headers naming where it came from and
// why, and then counts as done: its partition's commit moves past it.
func Example_deadLetter() {
	k, err := kafkatest.Start(kafkatest.Config{Topics: []string{"orders", "orders-dlq"}})
	if err != nil {
		panic(err)
	}
	defer k.Close()
	produce(k.Addrs(), "orders", "ok", "poison", "ok")

	sp, err := kafka.New(kafka.Config{
		Brokers: k.Addrs(), Topics: []string{"orders"}, Group: "orders", DeadLetterTopic: "orders-dlq",
		CommitInterval: 10 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)), // dead letters are logged at error level
	})
	if err != nil {
		panic(err)
	}
	b := topology.NewBuilder()
	b.Spout("orders", func() topology.Spout { return sp }).Output(kafka.RecordField)
	b.Bolt("process", func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, _ *topology.BasicCollector) error {
			if string(t.Value(0).(*kgo.Record).Value) == "poison" {
				return errors.New("cannot parse")
			}
			return nil
		}))
	}).Input("orders", topology.Shuffle())
	cfg := topology.Config{}
	cfg.Retry = topology.RetryPolicy{MaxAttempts: 3, Backoff: time.Millisecond}
	runToEnd(b, cfg, sp, "orders", "orders")

	r := firstRecord(k.Addrs(), "orders-dlq")
	var hs []string
	for _, h := range r.Headers {
		hs = append(hs, h.Key+"="+string(h.Value))
	}
	sort.Strings(hs)
	fmt.Printf("%s\n%s\n", r.Value, strings.Join(hs, "\n"))
	st := sp.Stats()
	fmt.Println("completed:", st.Completed, "dead-lettered:", st.DeadLettered)
	// Output:
	// poison
	// xorack-attempts=3
	// xorack-error=cannot parse
	// xorack-offset=1
	// xorack-partition=0
	// xorack-reason=explicit
	// xorack-topic=orders
	// completed: 2 dead-lettered: 1
}

// Topic to topic: each record's words are written to another topic by the
// sink bolt, each input acked once the broker has its record; the spout
// commits a partition only past records whose words are all written.
func ExampleSink() {
	k, err := kafkatest.Start(kafkatest.Config{Topics: []string{"sentences", "words"}})
	if err != nil {
		panic(err)
	}
	defer k.Close()
	produce(k.Addrs(), "sentences", "the cow jumped over the moon", "over the moon")

	sp, err := kafka.New(kafka.Config{Brokers: k.Addrs(), Topics: []string{"sentences"}, Group: "pipeline",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	sink, err := kafka.NewSink(kafka.SinkConfig{Brokers: k.Addrs(), Topic: "words",
		Key:   func(t *topology.Tuple) []byte { return []byte(t.String(0)) }, // one partition per word
		Value: func(t *topology.Tuple) ([]byte, error) { return []byte(t.String(0)), nil }})
	if err != nil {
		panic(err)
	}
	b := topology.NewBuilder()
	b.Spout("records", func() topology.Spout { return sp }).Output(kafka.RecordField)
	b.Bolt("split", func() topology.Bolt { return topology.Basic(topology.BasicFunc(splitRecord)) }).
		Input("records", topology.Shuffle()).Output("word")
	b.Bolt("words", sink.Bolt).Input("split", topology.Shuffle())
	runToEnd(b, topology.Config{}, sp, "pipeline", "sentences")
	if err := sink.Close(); err != nil {
		panic(err)
	}
	fmt.Println("records produced:", sink.Stats().Produced)
	// Output: records produced: 9
}
