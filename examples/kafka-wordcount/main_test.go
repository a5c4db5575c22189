package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/xorack/xorack/source/kafka/kafkatest"
)

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"-sentences", "1000"}, "every record processed, counted exactly once in the sink, and committed", 0},
		{[]string{"-sentences", "1000", "-fail", "0.05", "-partitions", "3"}, "words 7250 (a plain counter: ", 0},
		{[]string{"-sentences", "500", "-fail", "0.5", "-attempts", "1"}, "dead-lettered", 1},
		{[]string{"-fail", "2"}, "", 2},
	} {
		var out, errw bytes.Buffer
		code := run(tc.args, &out, &errw)
		if code != tc.code || !strings.Contains(out.String()+errw.String(), tc.want) {
			t.Errorf("%v: exit %d (want %d)\n%s%s", tc.args, code, tc.code, out.String(), errw.String())
		}
	}
}

// TestReplayChangesNothing runs the word count into a sink, then replays
// every record into the same sink (a second group starts from the
// beginning, as after losing every commit): the sink's totals do not
// move, every replayed write is a no-op, and a plain counter doubles.
func TestReplayChangesNothing(t *testing.T) {
	const topic, n = "sentences", 800
	k, err := kafkatest.Start(kafkatest.Config{Topics: []string{topic}, Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addrs()...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := produce(ctx, cl, topic, n); err != nil {
		t.Fatal(err)
	}
	sink := NewSink()
	cfg := wcConfig{brokers: k.Addrs(), topic: topic, group: "first", fail: 0.02, attempts: 20, seed: 7,
		logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	first, err := wordcount(ctx, cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	once := sink.Totals()
	applied, _ := sink.Writes()
	if want := wantTotals(n); !maps.Equal(once, want) {
		t.Fatalf("after one run the sink holds %d words, want %d", sum(once), sum(want))
	}

	cfg.group, cfg.seed = "replay", 8
	second, err := wordcount(ctx, cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if second.spout.Emitted != n {
		t.Fatalf("the replay emitted %d records, want all %d", second.spout.Emitted, n)
	}
	if again := sink.Totals(); !maps.Equal(again, once) {
		t.Errorf("the replay changed the sink: %d words, were %d", sum(again), sum(once))
	}
	if applied2, noops := sink.Writes(); applied2 != applied || noops < applied {
		t.Errorf("writes applied %d then %d; no-ops %d, want at least %d", applied, applied2, noops, applied)
	}
	if plain := sum(first.naive) + sum(second.naive); plain < 2*sum(once) {
		t.Errorf("a plain counter holds %d, want at least twice %d", plain, sum(once))
	}
}

func TestSinkRejectsADifferentValue(t *testing.T) {
	s := NewSink()
	p := Position{"t", 0, 5}
	if ok, err := s.Put(p, "w", 2); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := s.Put(p, "w", 2); ok || err != nil {
		t.Fatalf("the same write again: applied %v, %v", ok, err)
	}
	if _, err := s.Put(p, "w", 3); err == nil || !strings.Contains(err.Error(), `t/0@5 word "w" written as 2, then 3`) {
		t.Fatalf("a different value: %v", err)
	}
	if s.Totals()["w"] != 2 || s.Records() != 1 {
		t.Fatalf("totals %v", s.Totals())
	}
}
