package acker_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/invariants"
)

// TestExpiryInterleaves: a wave of timeouts is reported a slice per pass,
// between applying what the rings hold. 300,000 roots are sent at once
// with a 500 ms timeout and a 100 ms tick, so that they fall due within a
// few ticks (each tick's share on the shard's due lists, to be reported
// at that tick). A root sent once the first timeouts came back completes
// after a few slices of them, not after its tick's whole share. The
// wave's roots belong to task 0, the probe to task 1 with a receiver of
// its own (task 0's receiver is busy with the wave, and its new INITs may
// be held back meanwhile).
func TestExpiryInterleaves(t *testing.T) {
	if invariants.Enabled {
		t.Skip("the invariant build checks the whole table at every step: 300,000 roots take minutes")
	}
	defer goleak.VerifyNone(t)
	const wave = 300_000
	a, err := acker.New(acker.Config{Producers: 1, Tasks: 2,
		Shard: ackcore.Config{MaxPending: wave + 16, Timeout: 500 * time.Millisecond, Tick: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	// Task 0's receiver counts the wave's timeouts from the start (a
	// receiver left unpolled would hold back its tasks' INITs), and says
	// when the first ones came.
	var timeouts atomic.Int64
	first, waveDone := make(chan struct{}), make(chan error, 1)
	go func() {
		var out []ackcore.Outcome
		for n := 0; n < wave; {
			var ok bool
			if out, ok = a.TaskReceiver(0).WaitUntil(out[:0], time.After(time.Until(deadline))); !ok || time.Now().After(deadline) {
				waveDone <- fmt.Errorf("after %d timeouts: stopped or out of time", n)
				return
			}
			for _, o := range out {
				if o.Kind != ackcore.Failed || o.Reason != ackcore.ReasonTimeout {
					waveDone <- fmt.Errorf("unexpected outcome %+v", o)
					return
				}
			}
			if n == 0 && len(out) > 0 {
				close(first)
			}
			n += len(out)
			timeouts.Store(int64(n))
		}
		waveDone <- nil
	}()
	// The probe's receiver records how many timeouts the shard had
	// reported (taken by task 0's receiver, or waiting for it) when the
	// probe completed.
	const probe = wave + 1
	atProbe := make(chan int64, 1)
	go func() {
		var out []ackcore.Outcome
		for {
			var ok bool
			if out, ok = a.TaskReceiver(1).Wait(out[:0]); !ok {
				return
			}
			for _, o := range out {
				if o.Root == probe && o.Kind == ackcore.Completed {
					st := a.TaskReceiver(0).Stats()
					atProbe <- int64(st.Taken) + int64(st.Backlog)
				}
			}
		}
	}()
	p := a.Producer(0)
	msgs := make([]ackcore.Msg, wave)
	for i := range msgs {
		msgs[i] = ackcore.Msg{Root: uint64(i + 1), Kind: ackcore.Init, Val: 1}
	}
	if err := p.SendBatch(msgs); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first:
	case err := <-waveDone:
		t.Fatalf("before the first timeout: %v", err)
	}
	if err := p.SendBatch([]ackcore.Msg{{Root: probe, Kind: ackcore.Init, Task: 1, Val: 7}, {Root: probe, Kind: ackcore.Ack, Val: 7}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	// Slices are at most 1,024 roots: the probe waits for a few of them,
	// not for the whole wave (the shard used to report every due root
	// before applying anything else).
	select {
	case n := <-atProbe:
		t.Logf("the probe completed after %d of %d timeouts were reported", n, wave)
		if n > wave/2 {
			t.Errorf("the root sent after the first timeouts completed after %d of %d timeouts were reported; want a few slices", n, wave)
		}
	case <-time.After(time.Until(deadline)):
		t.Fatal("the probe never completed")
	}
	if err := <-waveDone; err != nil {
		t.Fatal(err)
	}
	st := a.Stop()
	if st.FailedTimeout != wave || st.Completed != 1 {
		t.Errorf("stats %+v", st)
	}
}
