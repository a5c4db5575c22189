package netio

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/invariants"
)

// TestOrphanShareOverNet (acker rule 10, netio rule 9): at the bound, the
// orphans that give way are the flooder's own, never another
// connection's while the flooder holds more. A table of 4,096 roots, two
// connections (an orphan share of 2,048 each): the client has 2,400 live
// roots and 100 trees whose first ACK reached the acker before their
// INIT; then a second connection sends 20,000 ACKs for roots that never
// come, enough to reach the bound and go on past it. All 100 early ACKs
// survive: when their INITs and the rest of their ACKs arrive, the 100
// trees complete (well before the server's 10 s timeout).
func TestOrphanShareOverNet(t *testing.T) {
	if invariants.Enabled {
		t.Skip("20,000 ACKs at the bound of a table of thousands: the invariant checks (O(table) a message at the bound) take minutes; the differential tests run them")
	}
	const bound, live, early, flood = 1 << 12, 2400, 100, 20_000
	s, c, rc := floodPair(t, bound)
	waitFor(t, 5*time.Second, "the orphan share of two connections", func() bool { return s.OrphanShare() == bound/2 })

	// The client's live roots (INITs whose ACKs never come) and the first
	// ACK of each of its 100 trees, ahead of their INITs.
	rng := rand.New(rand.NewPCG(5, 6))
	p, ib := c.Sender(0), c.Inbox(0)
	for i := range live {
		if err := p.Send(tree(rng, uint64(i+1)<<20|0x11, 0, 2)[0]); err != nil {
			t.Fatal(err)
		}
	}
	trees := make([][]ackcore.Msg, early)
	for i := range trees {
		trees[i] = tree(rng, uint64(i+1)<<20|0x22, 0, 3)
		if err := p.Send(trees[i][1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the live roots and early ACKs in the acker", func() bool {
		st := s.Stats().Acker
		return st.Inits == live && st.Acks == early
	})

	// The flood: ACKs for unknown roots, past the bound.
	msgs := make([]ackcore.Msg, maxMsgsPerFrame(DefaultMaxFrame))
	var buf []byte
	for sent := 0; sent < flood; {
		n := min(len(msgs), flood-sent)
		for i := range n {
			msgs[i] = ackcore.Msg{Root: rng.Uint64() | 1, Kind: ackcore.Ack, Val: rng.Uint64() | 1}
		}
		buf = appendMsgs(buf[:0], msgs[:n])
		if _, err := rc.Write(buf); err != nil {
			t.Fatal(err)
		}
		sent += n
	}
	waitFor(t, 10*time.Second, "the flood in the acker", func() bool { return s.Stats().Acker.Acks == early+flood })
	if st := s.Stats().Acker; st.OrphansEvicted == 0 || st.Pending != bound {
		t.Fatalf("the flood did not reach the bound: %+v", st)
	}

	// The 100 trees' INITs and other ACKs: every tree completes.
	for _, tr := range trees {
		if err := p.SendBatch(append(tr[:1:1], tr[2:]...)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	got := collect(t, ib, early, 8*time.Second)
	for _, tr := range trees {
		if o := got[tr[0].Root]; len(o) != 1 || o[0].Kind != ackcore.Completed {
			t.Fatalf("tree %#x: %v (acker %+v)", tr[0].Root, o, s.Stats().Acker)
		}
	}
	st := s.Stats().Acker
	t.Logf("%d early-ACKed trees completed beside %d flood ACKs: %d orphans evicted, %d refused", early, flood, st.OrphansEvicted, st.OrphansRefused)
}

// floodPair starts a server whose shard holds bound roots and connects
// two clients: a real one (client id 2, one task), first, and a raw
// flooder (client id 1, owning no task). Both are closed when the test
// ends.
func floodPair(t *testing.T, bound int) (*testServer, *Client, *rawConn) {
	t.Helper()
	s := startServer(t, func(c *ServerConfig) { c.Shard.MaxPending = bound })
	// The real client connects first: with one connection there is no
	// share but the acker's bound.
	cfg := clientCfg(s.addr)
	cfg.ID = 2
	c := mustDial(t, cfg, acker.Spec{Producers: 1, Tasks: 1})
	t.Cleanup(func() { c.Stop() })
	rc := rawDial(t, s.addr)
	t.Cleanup(func() { rc.Close() })
	rc.login(t, 1)
	return s, c, rc
}
