package main

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/xorack/xorack/examples/internal/kit"
	"github.com/xorack/xorack/examples/internal/kit/kittest"
	"github.com/xorack/xorack/source/kafka/kafkatest"
)

func TestRun(t *testing.T) {
	kittest.Run(t, run,
		kittest.Case{Args: []string{"-sentences", "1000"}, Want: []string{"every record processed, counted exactly once in the sink, and committed"}},
		kittest.Case{Args: []string{"-sentences", "1000", "-fail", "0.05", "-partitions", "3"}, Want: []string{"words 7250 (a plain counter: "}},
		kittest.Case{Args: []string{"-sentences", "500", "-fail", "0.5", "-attempts", "1"}, Code: 1, Want: []string{"dead-lettered"}},
		kittest.Case{Args: []string{"-fail", "2", "-partitions", "0"}, Code: 2, Want: []string{"kafka-wordcount: -fail 2: want a fraction in [0, 1); -partitions 0: want 1 to 1024\n"}},
	)
}

// TestReplayChangesNothing runs the word count into a sink, then replays
// every record into the same sink (a second group starts from the
// beginning, as after losing every commit): the sink's totals do not
// move, every replayed write is a no-op, and a plain counter doubles.
func TestReplayChangesNothing(t *testing.T) {
	const topic, n = "sentences", 800
	k, err := kit.StartKafka("", kafkatest.Config{Topics: []string{topic}, Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kit.Produce(ctx, k.Client, topic, corpus, n); err != nil {
		t.Fatal(err)
	}
	sink := kit.NewSink[string]()
	cfg := wcConfig{brokers: k.Addrs, topic: topic, group: "first", fail: 0.02, attempts: 20, seed: 7,
		logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if _, err := wordcount(ctx, cfg, sink); err != nil {
		t.Fatal(err)
	}
	once, _ := sink.Totals()
	applied, _ := sink.Writes()
	if want := corpus.Counts(n); !maps.Equal(once, want) {
		t.Fatalf("after one run the sink holds %d words, want %d", kit.Sum(once), kit.Sum(want))
	}

	cfg.group, cfg.seed = "replay", 8
	second, err := wordcount(ctx, cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if second.spout.Emitted != n {
		t.Fatalf("the replay emitted %d records, want all %d", second.spout.Emitted, n)
	}
	again, plain := sink.Totals()
	if !maps.Equal(again, once) {
		t.Errorf("the replay changed the sink: %d words, were %d", kit.Sum(again), kit.Sum(once))
	}
	if applied2, noops := sink.Writes(); applied2 != applied || noops < applied {
		t.Errorf("writes applied %d then %d; no-ops %d, want at least %d", applied, applied2, noops, applied)
	}
	if kit.Sum(plain) < 2*kit.Sum(once) {
		t.Errorf("a plain counter holds %d, want at least twice %d", kit.Sum(plain), kit.Sum(once))
	}
}
