package main

import (
	"bytes"
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/xorack/xorack/source/jetstream/jstest"
)

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
		code int
	}{
		{[]string{"-sentences", "2000"}, []string{"processed: 0 messages never", "ack floor 2000, 0 ack pending, 0 pending", "sink: 13500 words counted"}, 0},
		{[]string{"-sentences", "1000", "-fail", "0.05", "-spouts", "3"}, []string{"processed: 0 messages never", "sink: 6750 words counted"}, 0},
		// One attempt and many failures: messages are dead-lettered, so
		// not every one is processed, and the exit code says so.
		{[]string{"-sentences", "500", "-fail", "0.3", "-attempts", "1"}, []string{"dead-lettered"}, 1},
		{[]string{"-fail", "2"}, []string{"want -sentences >= 1"}, 2},
	} {
		var out, errw bytes.Buffer
		code := run(tc.args, &out, &errw)
		all := out.String() + errw.String()
		ok := code == tc.code
		for _, w := range tc.want {
			ok = ok && strings.Contains(all, w)
		}
		if !ok {
			t.Errorf("%v: exit %d (want %d, output with %q)\n%s", tc.args, code, tc.code, tc.want, all)
		}
	}
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
	srv, err := jstest.Start(jstest.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, last, err := load(ctx, js, "WC", n)
	if err != nil {
		t.Fatal(err)
	}
	o := options{stream: "WC", consumer: "first", spouts: 2, ackWait: 2 * time.Second, attempts: 10, fail: 0.02, seed: 3}
	sink := NewSink()
	r1, err := countOnce(ctx, js, o, first, last, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.verdict(sink, n); err != nil {
		t.Fatal(err)
	}
	idem1, naive1 := sink.Totals()
	writes1, noops1 := sink.Writes()
	if !maps.Equal(idem1, expected(n)) {
		t.Fatalf("after the first pass the sink holds %v, want %v", idem1, expected(n))
	}
	if _, again, _ := r1.duplicates(); again == 0 || noops1 == 0 {
		t.Fatalf("the first pass processed nothing twice (%d no-op writes): raise -fail", noops1)
	}

	// The replay: every message again, as a redelivery would bring it.
	o.consumer, o.fail = "replay", 0
	r2, err := countOnce(ctx, js, o, first, last, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.verdict(sink, n); err != nil {
		t.Fatal(err)
	}
	idem2, naive2 := sink.Totals()
	writes2, noops2 := sink.Writes()
	if !maps.Equal(idem2, idem1) {
		t.Errorf("the replay moved the idempotent totals: %v, then %v", idem1, idem2)
	}
	if replayed := writes2 - writes1; replayed == 0 || noops2-noops1 != replayed {
		t.Errorf("the replay made %d writes, %d of them no-ops; want all", replayed, noops2-noops1)
	}
	for w, c := range expected(n) {
		if naive2[w] != naive1[w]+c {
			t.Errorf("plain total of %q: %d, then %d; want the replay to add %d", w, naive1[w], naive2[w], c)
		}
	}
}

// TestLoadWindows loads ten windows and a few more through a client whose
// limit on outstanding publishes is one window: load never has more in
// flight, so no publish waits on the client's stall (which, all sentences
// in flight at once, failed with ErrTooManyStalledMsgs on a busy machine),
// and the sentences land in order.
func TestLoadWindows(t *testing.T) {
	srv, err := jstest.Start(jstest.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc, natsjs.WithPublishAsyncMaxPending(publishWindow))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 10*publishWindow + 3
	first, last, err := load(ctx, js, "windows", n)
	if err != nil || first != 1 || last != n {
		t.Fatalf("load: sequences %d-%d, %v; want 1-%d", first, last, err, n)
	}
	if p := js.PublishAsyncPending(); p != 0 {
		t.Errorf("%d publishes still pending after load", p)
	}
}
