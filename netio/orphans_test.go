package netio

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/invariants"
)

// TestOrphanFlood (netio rule 9): a connection owning no task floods ACKs,
// FAILs and RESETs for random roots while a second client runs trees
// whose first ACK it sends, and the server applies, before their INITs
// (early-ACK orphans, thousands of flooded messages old when their INITs
// come). The flooder's orphans are bounded per connection (Server.OrphanShare: half
// a shard's table with two connections) and its excess is refused,
// counted on its connection (ConnStats.OrphansRefused) and in the acker;
// so it cannot evict the second client's orphans, and every tree
// completes: none times out (the test's deadline is under the server's
// timeout).
func TestOrphanFlood(t *testing.T) {
	if invariants.Enabled {
		t.Skip("tables of thousands of roots flooded by millions of messages: the invariant checks (O(table) an Apply) take minutes; the differential tests run them")
	}
	const bound = 1 << 12
	s, c, rc := floodPair(t, bound)

	// The flooder: frames of unknown-root ACKs, FAILs and RESETs, for as
	// long as the trees run.
	var stop atomic.Bool
	var wg sync.WaitGroup
	var flooded atomic.Int64
	wg.Go(func() {
		_ = rc.SetDeadline(time.Now().Add(time.Minute))
		rng := rand.New(rand.NewPCG(1, 2))
		msgs := make([]ackcore.Msg, maxMsgsPerFrame(DefaultMaxFrame))
		var buf []byte
		for !stop.Load() {
			for i := range msgs {
				kind := [...]ackcore.Kind{ackcore.Ack, ackcore.Ack, ackcore.Fail, ackcore.Reset}[rng.IntN(4)]
				msgs[i] = ackcore.Msg{Root: rng.Uint64() | 1, Kind: kind, Val: rng.Uint64() | 1}
			}
			buf = appendMsgs(buf[:0], msgs)
			if _, err := rc.Write(buf); err != nil {
				t.Error(err)
				return
			}
			flooded.Add(int64(len(msgs)))
		}
	})
	waitFor(t, 10*time.Second, "the flood to reach the acker", func() bool { return s.Stats().Msgs > 4*bound })

	// The second client's trees: each window's first ACKs, then (the flood
	// running meanwhile) their INITs and the other ACKs.
	if share := s.OrphanShare(); share != bound/2 {
		t.Errorf("orphan share %d with two connections, want %d", share, bound/2)
	}
	n, window := 4000, 200
	if testing.Short() {
		n = 1000
	}
	p, ib := c.Sender(0), c.Inbox(0)
	rng := rand.New(rand.NewPCG(3, 4))
	deadline := time.After(8 * time.Second) // the server's timeout is 10 s
	completed, failed := 0, map[ackcore.Reason]int{}
	var buf []ackcore.Outcome
	for base := 0; base < n && !t.Failed(); base += window {
		rest := make([][]ackcore.Msg, window)
		wrote := c.Hosts()[0].BytesOut
		for i := range window {
			tr := tree(rng, uint64(base+i+1)<<16|0x5eed, 0, 3)
			if err := p.Send(tr[1]); err != nil { // the first edge's ACK, ahead of its INIT
				t.Fatal(err)
			}
			rest[i] = append(tr[:1:1], tr[2:]...)
		}
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
		// The early ACKs written, the acker applies some thousands of the
		// flood's messages more before their INITs follow.
		waitFor(t, 5*time.Second, "the early ACKs to be written", func() bool {
			return c.Hosts()[0].BytesOut >= wrote+uint64(headerSize+window*msgSize)
		})
		applied := func() uint64 { a := s.Stats().Acker; return a.Acks + a.Fails + a.Resets }
		mark := applied()
		waitFor(t, 5*time.Second, "more of the flood applied", func() bool { return applied() >= mark+4096 })
		for _, r := range rest {
			if err := p.SendBatch(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < window; {
			var ok bool
			buf, ok = ib.WaitUntil(buf[:0], deadline)
			if !ok || len(buf) == 0 {
				t.Errorf("after %d trees: %d outcomes of the last %d before the deadline (completed %d, failed %v)", base, got, window, completed, failed)
				break
			}
			got += len(buf)
			tally(buf, &completed, failed)
		}
	}
	stop.Store(true)
	wg.Wait()
	if completed != n {
		t.Fatalf("the second client: %d of %d trees completed, failed %v", completed, n, failed)
	}
	// The flooder's refusals are counted on its connection, and nothing
	// of the second client's.
	var conns []ConnStats
	waitFor(t, 5*time.Second, "the acker's counters to show the refusals", func() bool {
		conns = s.Conns()
		sum := uint64(0)
		for _, cs := range conns {
			sum += cs.OrphansRefused
		}
		return sum > 0 && sum == s.Stats().Acker.OrphansRefused
	})
	for _, cs := range conns {
		switch cs.ClientID {
		case 1:
			if cs.OrphansRefused == 0 {
				t.Errorf("flooder: nothing refused: %+v", cs)
			}
		case 2:
			if cs.OrphansRefused != 0 {
				t.Errorf("second client: %d refused", cs.OrphansRefused)
			}
		}
	}
	st := s.Stats()
	t.Logf("%d trees completed beside %d flooded messages: %d orphans refused, %d evicted, %d RESETs dropped by the server", completed, flooded.Load(), st.Acker.OrphansRefused, st.Acker.OrphansEvicted, st.ResetsDropped)
}
