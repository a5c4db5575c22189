package acker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/testkit"
)

// TestExpiryInterleaves: a wave of timeouts is reported a slice per pass,
// between applying what the rings hold. 300,000 roots are sent at once
// with a 500 ms timeout and a 100 ms tick, so that they fall due within a
// few ticks (each tick's share on the shard's due lists, to be reported
// at that tick). A root sent once the first timeouts came back completes
// after a few slices of them, not after its tick's whole share.
//
// The count is taken in the shard's own order, not by the clock: the wave
// (task 0) and the probe (task 1) share one receiver, with a Backlog that
// never holds INITs back, and the goroutine that takes the outcomes also
// sends the probe, noting how many timeouts the shard had published once
// the probe was flushed (taken, plus waiting in the receiver's ring). The timeouts between that
// and the probe's Completed in the stream are the ones the shard reported
// before applying the probe, whatever the scheduler did meanwhile.
func TestExpiryInterleaves(t *testing.T) {
	testkit.SkipUnderInvariants(t, "the invariant build checks the whole table at every step: 300,000 roots take minutes")
	const wave = 300_000
	a := started(t, acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 2, Receivers: 1}, Backlog: wave + 16,
		Shard: ackcore.Config{MaxPending: wave + 16, Timeout: 500 * time.Millisecond, Tick: 100 * time.Millisecond}})
	p := a.Sender(0)
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
	// From here the producer belongs to the receiving goroutine.
	const probe = wave + 1
	type result struct {
		sentAt, doneAt int // timeouts published when the probe was sent, and before its Completed
		err            error
	}
	res := make(chan result, 1)
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		r := a.Inbox(0).(*acker.Receiver)
		var out []ackcore.Outcome
		n, sentAt, doneAt := 0, -1, -1
		for n < wave || doneAt < 0 {
			var ok bool
			if out, ok = r.WaitUntil(out[:0], time.After(time.Until(deadline))); !ok || time.Now().After(deadline) {
				res <- result{err: fmt.Errorf("after %d timeouts (probe sent at %d, done at %d): stopped or out of time", n, sentAt, doneAt)}
				return
			}
			for _, o := range out {
				switch {
				case o.Root == probe && o.Kind == ackcore.Completed:
					doneAt = n
				case o.Kind == ackcore.Failed && o.Reason == ackcore.ReasonTimeout && o.Root <= wave:
					n++
				default:
					res <- result{err: fmt.Errorf("unexpected outcome %+v", o)}
					return
				}
			}
			if sentAt < 0 && n > 0 {
				if err := p.SendBatch([]ackcore.Msg{{Root: probe, Kind: ackcore.Init, Task: 1, Val: 7}, {Root: probe, Kind: ackcore.Ack, Val: 7}}); err != nil {
					res <- result{err: err}
					return
				}
				if err := p.Flush(); err != nil {
					res <- result{err: err}
					return
				}
				// Counted once the probe is in the ring: what the shard
				// published while this goroutine was descheduled between
				// a count and the Flush is not the shard's delay.
				sentAt = n + r.Stats().Backlog
			}
		}
		res <- result{sentAt: sentAt, doneAt: doneAt}
	}()
	got := <-res
	if got.err != nil {
		t.Fatal(got.err)
	}
	between := got.doneAt - got.sentAt
	t.Logf("the probe, sent when %d of %d timeouts were out, completed after %d more", got.sentAt, wave, between)
	// Slices are at most 1,024 roots: the probe waits for a few of them,
	// not for its tick's share of the wave (the shard used to report every
	// due root before applying anything else).
	if between > wave/10 {
		t.Errorf("%d timeouts were reported between the probe's send and its completion; want a few slices", between)
	}
	st := a.Stop()
	if st.FailedTimeout != wave || st.Completed != 1 {
		t.Errorf("stats %+v", st)
	}
}
