package acker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// stuckAcker starts an acker of two tasks whose receiver 1 nobody polls,
// with n INITs of task 1 pending (applied) and receiver 0 run to the end.
func stuckAcker(t *testing.T, n int, cfg acker.Config) (a *acker.Acker, polled <-chan int) {
	t.Helper()
	cfg.Spec = acker.Spec{Producers: 1, Tasks: 2}
	cfg.Shard = ackcore.Config{MaxPending: 1 << 15}
	a = started(t, cfg)
	p := a.Sender(0)
	for r := uint64(1); r <= uint64(n); r++ {
		if err := p.Send(ackcore.Msg{Root: r, Kind: ackcore.Init, Task: 1, Val: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Send(ackcore.Msg{Root: uint64(n) + 1, Kind: ackcore.Init, Task: 0, Val: 1}); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := await(testWait, "every INIT applied", // published at the executor's ticks
		func() bool { return a.Stats().Inits >= uint64(n)+1 },
		func() string { return fmt.Sprintf("%d of %d INITs applied", a.Stats().Inits, n+1) }); err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 1)
	go func() {
		k := 0
		a.Inbox(0).(*acker.Receiver).Run(func(ackcore.Outcome) { k++ })
		got <- k
	}()
	return a, got
}

// TestStopUnpolledReceiver: with 10,000 INITs pending for a receiver
// nobody polls, StopContext returns soon after its deadline, logs the
// receiver while it waits, and its error names the receiver with every
// one of its outcomes accounted for: dropped, or left in its rings (and
// taken from them after Stop).
func TestStopUnpolledReceiver(t *testing.T) {
	const n, wait = 10_000, 1500 * time.Millisecond
	var logs bytes.Buffer // written by StopContext on this goroutine
	a, polled := stuckAcker(t, n, acker.Config{Shards: 2, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	start := time.Now() // before the deadline is set: took is then never under wait
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	st, err := a.StopContext(ctx)
	took := time.Since(start)
	if took < wait || took > wait+5*time.Second {
		t.Errorf("StopContext returned after %v, deadline %v", took, wait)
	}
	var se *acker.StopError
	if !errors.As(err, &se) || !errors.Is(err, context.DeadlineExceeded) || len(se.Receivers) != 1 || se.Unflushed != nil {
		t.Fatalf("StopContext: %v", err)
	}
	u := se.Receivers[0]
	if u.Receiver != 1 || u.Dropped == 0 || u.Dropped+u.InRings != n || !strings.Contains(err.Error(), "receiver 1 dropped") {
		t.Fatalf("untaken %+v: %v", u, err)
	}
	if st.FailedStopped != n+1 {
		t.Fatalf("stats %+v", st)
	}
	if k := receiveWithin(t, polled, "receiver 0's Run returning after Stop"); k != 1 {
		t.Fatalf("receiver 0 took %d outcomes, want 1", k)
	}
	if d := a.Inbox(1).(*acker.Receiver).Stats().Dropped; d != u.Dropped {
		t.Fatalf("ReceiverStats.Dropped %d, error says %d", d, u.Dropped)
	}
	left := 0
	if err := within(testWait, "receiver 1's Run taking what Stop left in its rings", func() {
		a.Inbox(1).(*acker.Receiver).Run(func(ackcore.Outcome) { left++ })
	}); err != nil {
		t.Fatal(err)
	}
	if left != u.InRings {
		t.Fatalf("receiver 1 took %d after Stop, error says %d in its rings", left, u.InRings)
	}
	if l := logs.String(); !strings.Contains(l, "waiting for receivers") || !strings.Contains(l, "receiver 1 holds") {
		t.Fatalf("no waiting line naming receiver 1 in the log:\n%s", l)
	}
	if st2, err2 := a.StopContext(context.Background()); err2 != err || st2 != st {
		t.Fatalf("second Stop: %v, %+v", err2, st2)
	}
}

// TestStopDefaultDeadline: Stop (Port's, no context) gives up after
// Config.StopTimeout and logs the error naming the receiver.
func TestStopDefaultDeadline(t *testing.T) {
	var logs bytes.Buffer // written by StopContext on this goroutine
	a, polled := stuckAcker(t, 10_000, acker.Config{StopTimeout: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	start := time.Now()
	st := a.Stop()
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Stop returned after %v, StopTimeout 200ms", took)
	}
	receiveWithin(t, polled, "receiver 0's Run returning after Stop")
	if st.FailedStopped != 10_001 || a.Inbox(1).(*acker.Receiver).Stats().Dropped == 0 {
		t.Fatalf("stats %+v, receiver 1 %+v", st, a.Inbox(1).(*acker.Receiver).Stats())
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "receiver 1 dropped") {
		t.Fatalf("Stop logged no error naming receiver 1:\n%s", l)
	}
	go a.Inbox(1).(*acker.Receiver).Run(func(ackcore.Outcome) {})
}

// TestStopUnflushed: a producer that stages messages and never flushes
// them is named by Stop with their exact count, in the error and in
// NotApplied, as many as it sent less the outcomes of those published
// (its full spans); its next call reports nothing more (Stop counted
// them), and producers that flushed, or never sent, are not named. With
// 1 shard and fewer messages than Batch, none is published and Stop
// counts all of them.
func TestStopUnflushed(t *testing.T) {
	for _, c := range []struct{ shards, staged int }{{1, 1}, {1, 63}, {4, 5}, {1, 200}, {4, 1000}} {
		a := started(t, acker.Config{Shards: c.shards, Spec: acker.Spec{Producers: 3, Tasks: 1}, Batch: 64,
			Shard: ackcore.Config{MaxPending: 4096}})
		outs := make(chan [3]int)
		go func() {
			var k [3]int
			a.Inbox(0).(*acker.Receiver).Run(func(o ackcore.Outcome) { k[o.Root>>32]++ })
			outs <- k
		}()
		forgot, flushed := a.Sender(1), a.Sender(2)
		for r := uint64(1); r <= uint64(c.staged); r++ {
			if err := forgot.Send(ackcore.Msg{Root: 1<<32 | r, Kind: ackcore.Init, Val: r}); err != nil {
				t.Fatal(err)
			}
			if err := flushed.Send(ackcore.Msg{Root: 2<<32 | r, Kind: ackcore.Init, Val: r}); err != nil {
				t.Fatal(err)
			}
		}
		if err := flushed.Flush(); err != nil {
			t.Fatal(err)
		}
		st, err := stopWithin(a, testWait)
		k := receiveWithin(t, outs, "the receiver's Run returning after Stop")
		var se *acker.StopError
		if !errors.As(err, &se) || se.Err != nil || se.Receivers != nil || len(se.Unflushed) != 1 || se.Unflushed[0].Producer != 1 {
			t.Fatalf("%+v: StopContext: %v", c, err)
		}
		u := se.Unflushed[0]
		want := c.staged - k[1] // all but the published spans' INITs, each reported Failed{stopped}
		if c.shards == 1 && c.staged < 64 && want != c.staged {
			t.Fatalf("%+v: %d of the forgetful producer's INITs applied with Batch 64", c, k[1])
		}
		if u.Staged != want || len(u.Shards) < 1 || len(u.Shards) > c.shards ||
			!strings.Contains(err.Error(), fmt.Sprintf("producer 1: %d in shards", want)) {
			t.Fatalf("%+v: unflushed %+v, want %d: %v", c, u, want, err)
		}
		if n := a.NotApplied(1); n != uint64(want) || a.NotApplied(0) != 0 || a.NotApplied(2) != 0 {
			t.Fatalf("%+v: NotApplied %d %d %d, want 0 %d 0", c, a.NotApplied(0), n, a.NotApplied(2), want)
		}
		if k[2] != c.staged || k[0] != 0 || st.FailedStopped != uint64(k[1]+k[2]) {
			t.Fatalf("%+v: outcomes by producer %v, stats %+v", c, k, st)
		}
		var na *acker.NotAppliedError
		if err := forgot.Flush(); !errors.Is(err, acker.ErrClosed) || errors.As(err, &na) {
			t.Fatalf("%+v: the forgetful producer's Flush after Stop counted its messages: %v, want ErrClosed alone", c, err)
		}
		if err := forgot.Flush(); err != nil {
			t.Fatalf("%+v: a second Flush, nothing staged: %v", c, err)
		}
		if n := a.NotApplied(1); n != uint64(want) {
			t.Fatalf("%+v: NotApplied(1) %d after the Flush, want %d", c, n, want)
		}
	}
}

// TestSendMisuse: before Start every send says so; a malformed message is
// refused at the call, naming the value, and sends nothing; after Stop
// sends return ErrClosed.
func TestSendMisuse(t *testing.T) {
	a, err := acker.New(acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 2}, Shard: ackcore.Config{MaxPending: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	p := a.Sender(0)
	ok := ackcore.Msg{Root: 7, Kind: ackcore.Init, Task: 1, Val: 3}
	if err := p.Send(ok); !errors.Is(err, acker.ErrNotStarted) {
		t.Fatalf("Send before Start: %v", err)
	}
	if sent, err := p.TrySend(ok); sent || !errors.Is(err, acker.ErrNotStarted) {
		t.Fatalf("TrySend before Start: %v %v", sent, err)
	}
	if err := p.SendBatch([]ackcore.Msg{ok}); !errors.Is(err, acker.ErrNotStarted) {
		t.Fatalf("SendBatch before Start: %v", err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		m    ackcore.Msg
		want string
	}{
		{ackcore.Msg{Kind: ackcore.Ack, Val: 1}, "ACK with root 0"},
		{ackcore.Msg{Root: 9, Val: 1}, "root 0x9: unknown message kind 0"},
		{ackcore.Msg{Root: 9, Kind: 7}, "unknown message kind 7"},
		{ackcore.Msg{Root: 9, Kind: ackcore.Init, Task: ackcore.MaxTask + 1}, "exceeds MaxTask"},
		{ackcore.Msg{Root: 9, Kind: ackcore.Init, Task: 2}, "names task 2, acker has 2 tasks"},
		{ackcore.Msg{Root: 9, Kind: ackcore.Reset, TimeoutMs: ackcore.MaxTimeoutMs + 1}, "timeout 86400001 ms"},
	} {
		if err := p.Send(c.m); err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "acker: producer 0: ") {
			t.Errorf("Send(%+v): %v, want an error naming %q", c.m, err, c.want)
		}
		if sent, err := p.TrySend(c.m); sent || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("TrySend(%+v): %v %v", c.m, sent, err)
		}
		if err := p.SendBatch([]ackcore.Msg{ok, c.m}); err == nil || !strings.Contains(err.Error(), "acker: producer 0: message 1: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SendBatch(ok, %+v): %v", c.m, err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	go a.Inbox(1).(*acker.Receiver).Run(func(ackcore.Outcome) {})
	st, err := stopWithin(a, testWait)
	if err != nil || st.Inits != 0 || st.RefusedInvalid != 0 {
		t.Fatalf("the refused messages reached the shard: %v, %+v", err, st)
	}
	if err := p.Send(ok); !errors.Is(err, acker.ErrClosed) {
		t.Fatalf("Send after Stop: %v", err)
	}
	if err := p.SendBatch([]ackcore.Msg{ok}); !errors.Is(err, acker.ErrClosed) {
		t.Fatalf("SendBatch after Stop: %v", err)
	}
	if sent, err := p.TrySend(ok); sent || !errors.Is(err, acker.ErrClosed) {
		t.Fatalf("TrySend after Stop: %v %v", sent, err)
	}
	// An acker stopped without ever starting: ErrClosed too.
	b, err := acker.New(acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 1}, Shard: ackcore.Config{MaxPending: 16}})
	if err != nil {
		t.Fatal(err)
	}
	b.Stop()
	if err := b.Sender(0).Send(ackcore.Msg{Root: 7, Kind: ackcore.Ack, Val: 3}); !errors.Is(err, acker.ErrClosed) {
		t.Fatalf("Send after Stop without Start: %v", err)
	}
}

// TestOldestPendingWhileStopWaits: the goroutine that polls a receiver
// asks OldestPending while Stop waits for that very receiver to take
// what it reports: the answer comes at once (the stopping shard reports
// nothing), the poller then takes every outcome, and Stop ends with none
// dropped. A stopping shard serves no request, so an OldestPending that
// waited for it held the poller, and with it Stop, until Stop's deadline,
// which dropped the receiver's outcomes.
func TestOldestPendingWhileStopWaits(t *testing.T) {
	const n = 10_000
	a, polled := stuckAcker(t, n, acker.Config{})
	r1 := a.Inbox(1).(*acker.Receiver)
	stopped := make(chan error, 1)
	go func() {
		// Past the test's own waits: a hang shows as theirs, not as a
		// Stop that gave up.
		ctx, cancel := context.WithTimeout(context.Background(), 10*testWait)
		defer cancel()
		_, err := a.StopContext(ctx)
		stopped <- err
	}()
	// Receiver 1 gets no outcome before Stop reports its roots stopped.
	if err := await(testWait, "Stop reporting receiver 1's roots", func() bool { return r1.Stats().Backlog > 0 },
		func() string { return fmt.Sprintf("receiver 1: %+v", r1.Stats()) }); err != nil {
		t.Fatal(err)
	}
	var old []ackcore.PendingRoot
	if err := within(testWait/4, "OldestPending while Stop waits for the caller's receiver", func() { old = a.OldestPending(5) }); err != nil {
		t.Fatal(err)
	}
	if len(old) > 5 {
		t.Fatalf("OldestPending(5) gave %d roots", len(old))
	}
	took := 0
	if err := within(testWait, "receiver 1's Run taking what Stop reports", func() {
		r1.Run(func(o ackcore.Outcome) {
			if o.Kind == ackcore.Failed && o.Reason == ackcore.ReasonStopped {
				took++
			}
		})
	}); err != nil {
		t.Fatal(err)
	}
	if err := receiveWithin(t, stopped, "Stop"); err != nil {
		t.Fatalf("StopContext: %v", err)
	}
	if took != n || r1.Stats().Dropped != 0 {
		t.Fatalf("receiver 1 took %d stopped roots of %d, dropped %d", took, n, r1.Stats().Dropped)
	}
	receiveWithin(t, polled, "receiver 0's Run returning after Stop")
}
