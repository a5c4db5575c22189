package acker_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// testWait bounds each wait of a test for what the acker's goroutines do
// (a Send, a Stop, a receiver's Run, a WaitGroup): seconds on a loaded
// machine, so that past it something is lost, and the test fails naming
// what it waited for instead of hanging until go test's timeout.
const testWait = time.Minute

// await polls done, yielding the processor between polls, until it holds
// (nil), or until d has passed: then an error naming what was awaited
// and, from state, what is missing. The tests wait with it for what the
// acker's goroutines do (outcomes delivered, counters published), so that
// a lost outcome fails the test in d, naming what was lost, instead of
// hanging it until go test's timeout. It never sleeps: done is polled.
// The test's goroutine fails with the error; another goroutine hands it to
// the test's.
func await(d time.Duration, what string, done func() bool, state func() string) error {
	start := time.Now()
	for !done() {
		if time.Since(start) > d {
			return fmt.Errorf("%s: not within %v: %s", what, d, state())
		}
		runtime.Gosched()
	}
	return nil
}

// within runs f, a call that blocks until the acker's goroutines have
// done something (a WaitGroup's Wait, a receive from a channel, a
// receiver's Run after Stop), on a goroutine of its own and waits for it
// to return: nil, or, once d has passed, an error naming what was
// awaited. f is then left blocked: the test fails with the error, and
// TestMain's leak check names the goroutine.
func within(d time.Duration, what string, f func()) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("%s: not within %v", what, d)
	}
}

// receiveWithin receives from c, up to testWait, failing the test past
// it with an error naming what it waited for.
func receiveWithin[T any](t testing.TB, c <-chan T, what string) T {
	t.Helper()
	var v T
	if err := within(testWait, what, func() { v = <-c }); err != nil {
		t.Fatal(err)
	}
	return v
}

// trySendWithin tries p.TrySend(m) until it takes m or fails, for up to d: the
// loop of a goroutine that must not wait in Send, with an error naming m
// once d has passed (a ring that never drains, a hold-back never lifted)
// instead of a spin without end.
func trySendWithin(p acker.Sender, m ackcore.Msg, d time.Duration) error {
	sent, err := p.TrySend(m)
	if sent || err != nil {
		return err
	}
	tries := 1
	if werr := await(d, "TrySend taking a message", func() bool {
		sent, err = p.TrySend(m)
		tries++
		return sent || err != nil
	}, func() string { return fmt.Sprintf("%v of root %#x refused %d times", m.Kind, m.Root, tries) }); werr != nil {
		return werr
	}
	return err
}

// stopWithin is StopContext with a deadline d from now: a Stop that
// should find every outcome taken fails, past d, with a *StopError naming
// the receivers still holding some, instead of waiting for them forever.
func stopWithin(a *acker.Acker, d time.Duration) (ackcore.Stats, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return a.StopContext(ctx)
}

// TestAwait: await returns nil once done holds, polling until then, and
// an error naming what it waited for and what is missing once d passes.
func TestAwait(t *testing.T) {
	polls := 0
	if err := await(time.Minute, "a third poll", func() bool { polls++; return polls == 3 }, nil); err != nil || polls != 3 {
		t.Fatalf("await: %v after %d polls, want nil after 3", err, polls)
	}
	const d = 20 * time.Millisecond
	start := time.Now()
	err := await(d, "an outcome for root 7", func() bool { return false }, func() string { return "2 of 3 outcomes" })
	if took := time.Since(start); err == nil || took < d ||
		err.Error() != "an outcome for root 7: not within 20ms: 2 of 3 outcomes" {
		t.Fatalf("await of what never happens: %v after %v", err, took)
	}
}

// TestWithin: within returns nil once f returns, and an error naming what
// it waited for once d passes while f still blocks.
func TestWithin(t *testing.T) {
	ran := false
	if err := within(time.Minute, "a call that returns", func() { ran = true }); err != nil || !ran {
		t.Fatalf("within: %v, ran %v", err, ran)
	}
	const d = 20 * time.Millisecond
	block := make(chan struct{})
	defer close(block) // after the check: f is still blocked at it
	start := time.Now()
	err := within(d, "receiver 0's Run returning", func() { <-block })
	if took := time.Since(start); err == nil || took < d || err.Error() != "receiver 0's Run returning: not within 20ms" {
		t.Fatalf("within of a call that blocks: %v after %v", err, took)
	}
}

// TestTrySendWithin: trySendWithin returns once TrySend takes the message, and
// an error naming it, not a spin without end, when a hold-back is never
// lifted (nobody polls the receiver).
func TestTrySendWithin(t *testing.T) {
	a := started(t, acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 1}, OutcomeRingSize: 16, Backlog: 8,
		Shard: ackcore.Config{MaxPending: 1024}})
	p := a.Sender(0)
	const d = 200 * time.Millisecond
	var err error
	root := uint64(0) // the last one tried
	for err == nil && root < 1<<20 {
		root++
		err = trySendWithin(p, ackcore.Msg{Root: root, Kind: ackcore.Init}, d) // val 0: completes at once
		p.Flush()
	}
	if err == nil || !strings.Contains(err.Error(), "TrySend taking a message: not within 200ms: INIT of root 0x") {
		t.Fatalf("trySendWithin of %d INITs nobody takes the outcomes of: %v", root, err)
	}
	if root <= 16 {
		t.Fatalf("trySendWithin refused root %d, before the outcome ring (16) was full: %v", root, err)
	}
	t.Logf("root %d refused: %v", root, err)
	go a.Inbox(0).(*acker.Receiver).Run(func(ackcore.Outcome) {})
	if _, err := stopWithin(a, testWait); err != nil {
		t.Fatal(err)
	}
}
