package netio

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// TestFramesPastTheRingsEnd: frames the acker's ring cannot take in one
// span (they run past its end, find less room than they hold, or hold
// more than the whole ring) are decoded into the connection's slice and
// staged from there, each message once: every tree completes, once, and
// the server hands the acker exactly the messages sent. A ring of 64
// places and frames of 50, 100, 37, 64 and 129 messages put most frames
// on that path.
func TestFramesPastTheRingsEnd(t *testing.T) {
	s := startServer(t, func(c *ServerConfig) { c.RingSize = 64 })
	c := mustDial(t, clientCfg(s.addr), acker.Spec{Producers: 1, Tasks: 1})
	defer c.Stop()
	const roots, fanout = 3000, 8
	rng := rand.New(rand.NewPCG(5, 6))
	var msgs []ackcore.Msg
	for r := 1; r <= roots; r++ {
		msgs = append(msgs, tree(rng, uint64(r), 0, fanout)...)
	}
	p := c.Sender(0)
	sizes := []int{50, 100, 37, 64, 129}
	for i, rest := 0, msgs; len(rest) > 0; i++ {
		n := min(sizes[i%len(sizes)], len(rest))
		if err := p.SendBatch(rest[:n]); err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	got := collect(t, c.Inbox(0), roots, 20*time.Second)
	for r := uint64(1); r <= roots; r++ {
		if o := got[r]; len(o) != 1 || o[0].Kind != ackcore.Completed || o[0].Task != 0 {
			t.Fatalf("root %d: outcomes %v, want one Completed for task 0", r, o)
		}
	}
	// The reader counts a read batch's messages after publishing them.
	waitFor(t, 5*time.Second, "the server's count of the messages sent", func() bool { return s.Stats().Msgs >= uint64(len(msgs)) })
	if n := s.Stats().Msgs; n != uint64(len(msgs)) {
		t.Fatalf("server handed the acker %d messages, sent %d", n, len(msgs))
	}
}
