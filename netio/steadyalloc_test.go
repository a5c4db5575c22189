package netio

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/testkit"
)

// TestSteadyStateAllocs: once its buffers have grown, the round trip
// (client, server reader and writer, router, acker) allocates nothing per
// frame. Frames of 300 messages do not divide the server's ring of 1,024,
// so their places in it wrap every few frames: a frame the ring cannot
// take in one span is decoded into the connection's reused slice, not a
// new one (it was, once: 9.6 KB a wrap).
func TestSteadyStateAllocs(t *testing.T) {
	testkit.SkipUnderInvariants(t, "the invariant build's checks allocate on the acker's path; the count is of the production path")
	s := startServer(t, func(c *ServerConfig) { c.Shard.MaxPending = 1 << 18; c.RingSize = 1024 })
	c := mustDial(t, clientCfg(s.addr), acker.Spec{Producers: 1, Tasks: 1})
	defer c.Stop()
	const frame, window = 300, 30_000
	st := newTreeStream(rand.New(rand.NewPCG(3, 4)), 8)
	p, ib := c.Sender(0), c.Inbox(0)
	out := make([]ackcore.Outcome, 0, 1<<16)
	send := make([]ackcore.Msg, 0, frame)
	inflight := 0
	completed, others := 0, 0
	// Every wait for outcomes ends by this deadline (a channel closed
	// then, made before the count): outcomes lost fail the test, naming
	// how many are missing, instead of hanging it.
	const wait = 2 * time.Minute
	deadline := make(chan time.Time)
	stop := time.AfterFunc(wait, func() { close(deadline) })
	defer stop.Stop()
	// run sends frames of the stream, taking outcomes whenever window
	// roots are in flight.
	run := func(frames int) {
		for range frames {
			send = send[:0]
			for len(send) < frame {
				m := st.next()
				if m.Kind == ackcore.Init {
					inflight++
				}
				send = append(send, m)
			}
			if err := p.SendBatch(send); err != nil {
				t.Fatal(err)
			}
			if err := p.Flush(); err != nil {
				t.Fatal(err)
			}
			for inflight >= window {
				var ok bool
				if out, ok = ib.WaitUntil(out[:0], deadline); !ok {
					t.Fatal("inbox closed")
				}
				if len(out) == 0 {
					select {
					case <-deadline:
						t.Fatalf("%d roots in flight without an outcome after %v", inflight, wait)
					default:
					}
				}
				inflight -= len(out)
				n := count(out, ackcore.Completed)
				completed, others = completed+n, others+len(out)-n
			}
		}
	}
	// Warm up: every buffer at its working size.
	run(2000)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	const frames = 3000
	run(frames)
	runtime.ReadMemStats(&m1)
	allocs := m1.Mallocs - m0.Mallocs
	t.Logf("%d allocations over %d frames of %d messages", allocs, frames, frame)
	if allocs > frames/10 {
		t.Errorf("%d allocations over %d frames of %d messages, want at most %d", allocs, frames, frame, frames/10)
	}
	// The traffic was real: roots completed, and none failed.
	if completed == 0 || others > 0 {
		t.Fatalf("%d roots completed and %d had another outcome, want some completed and none other", completed, others)
	}
}

// count is the outcomes of kind k in outs.
func count(outs []ackcore.Outcome, k ackcore.OutcomeKind) int {
	n := 0
	for _, o := range outs {
		if o.Kind == k {
			n++
		}
	}
	return n
}
