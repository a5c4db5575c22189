package main

import (
	"bytes"
	"context"
	"io"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/xorack/xorack/examples/internal/kit"
	"github.com/xorack/xorack/examples/internal/kit/kittest"
	"github.com/xorack/xorack/source/jetstream"
	"github.com/xorack/xorack/source/jetstream/jstest"
)

func TestRun(t *testing.T) {
	kittest.Run(t, run,
		kittest.Case{Args: []string{"-sentences", "2000"}, Want: []string{"processed: 0 messages never", "ack floor 2000, 0 ack pending, 0 pending", "sink: 13500 words counted", "every message processed and acked"}},
		kittest.Case{Args: []string{"-sentences", "1000", "-fail", "0.05", "-spouts", "3"}, Want: []string{"processed: 0 messages never", "sink: 6750 words counted"}},
		// One attempt and many failures: messages are dead-lettered, so
		// not every one is processed, and the exit code says so.
		kittest.Case{Args: []string{"-sentences", "500", "-fail", "0.3", "-attempts", "1"}, Code: 1, Want: []string{"dead-lettered"}},
		kittest.Case{Args: []string{"-fail", "2", "-spouts", "0"}, Code: 2, Want: []string{"jetstream-wordcount: -fail 2: want a fraction in [0, 1); -spouts 0: want at least 1\n"}},
	)
}

// TestRunAgainstServer points -nats at a server of its own, twice: the
// second run appends to the stream and reads only what it loaded.
func TestRunAgainstServer(t *testing.T) {
	srv, err := jstest.Start(jstest.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for i, want := range []string{"sequences 1-300", "sequences 301-600"} {
		var out, errw bytes.Buffer
		if code := run([]string{"-nats", srv.URL(), "-sentences", "300"}, &out, &errw); code != 0 || !strings.Contains(out.String(), want) {
			t.Errorf("run %d: exit %d, want 0 and %q\n%s%s", i+1, code, want, out.String(), errw.String())
		}
	}
}

// TestIdempotentSinkReplay counts a stream into a sink, then replays the
// whole stream through a new consumer into the same sink: the idempotent
// totals do not move (every replayed write is a no-op), while the plain
// running totals count everything again.
func TestIdempotentSinkReplay(t *testing.T) {
	const n = 1000
	nats, err := kit.StartNATS("", "replay-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nats.Close()
	js := nats.JS
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, last, err := load(ctx, js, "WC", n)
	if err != nil {
		t.Fatal(err)
	}
	o := options{Common: kit.Common{Fail: 0.02, Seed: 3, Attempts: 10}, stream: "WC", consumer: "first", spouts: 2, ackWait: 2 * time.Second}
	sink := kit.NewSink[jetstream.Position]()
	// pass counts the stream once into sink through o's consumer, checks
	// the run's verdict and returns the run with the sink's totals and
	// writes after it.
	type state struct {
		idem, naive    map[string]int
		applied, noops int
	}
	pass := func() (*result, state) {
		t.Helper()
		r, err := countOnce(ctx, js, o, first, last, sink)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.verdict(io.Discard, sink, n); err != nil {
			t.Fatal(err)
		}
		var st state
		st.idem, st.naive = sink.Totals()
		st.applied, st.noops = sink.Writes()
		return r, st
	}
	r1, s1 := pass()
	if !maps.Equal(s1.idem, corpus.Counts(n)) {
		t.Fatalf("after the first pass the sink holds %v, want %v", s1.idem, corpus.Counts(n))
	}
	if _, again, _ := r1.duplicates(); again == 0 || s1.noops == 0 {
		t.Fatalf("the first pass processed nothing twice (%d no-op writes): raise -fail", s1.noops)
	}

	// The replay: every message again, as a redelivery would bring it.
	o.consumer, o.Fail = "replay", 0
	_, s2 := pass()
	if !maps.Equal(s2.idem, s1.idem) {
		t.Errorf("the replay moved the idempotent totals: %v, then %v", s1.idem, s2.idem)
	}
	if replayed := s2.applied + s2.noops - s1.applied - s1.noops; replayed == 0 || s2.noops-s1.noops != replayed {
		t.Errorf("the replay made %d writes, %d of them no-ops; want all", replayed, s2.noops-s1.noops)
	}
	for w, c := range corpus.Counts(n) {
		if s2.naive[w] != s1.naive[w]+c {
			t.Errorf("plain total of %q: %d, then %d; want the replay to add %d", w, s1.naive[w], s2.naive[w], c)
		}
	}
}
