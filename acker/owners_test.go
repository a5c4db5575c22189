package acker_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/splitmix"
	"github.com/xorack/xorack/internal/testkit"
)

// TestOrphanShareFlood: with an orphan share per producer, a producer
// flooding ACKs, FAILs and RESETs for unknown roots makes at most its
// share of orphans and has the rest refused, counted for it
// (OrphansRefused(p)), while a bolt's early ACKs (sent before their
// spout's INITs) still make theirs: every tree completes, nothing times
// out, and nothing of the bolt's or the spout's is refused.
func TestOrphanShareFlood(t *testing.T) {
	testkit.SkipUnderInvariants(t, "a flood of 100,000 messages into a table of 4,096: the invariant checks (O(table) a step) take minutes")
	const bound, share, window = 4096, 1024, 256
	roots := testkit.Size(80*window, 20*window)
	clock := &ackcore.FakeClock{}
	a := started(t, acker.Config{
		Spec: acker.Spec{Producers: 3, Tasks: 1}, Shard: ackcore.Config{MaxPending: bound, Timeout: 30 * time.Second, Clock: clock, OrphanShare: share},
	})
	var completed, other atomic.Int64
	done := make(chan struct{})
	go func() {
		a.Inbox(a.ReceiverOf(0)).(*acker.Receiver).Run(func(o ackcore.Outcome) {
			if o.Kind == ackcore.Completed {
				completed.Add(1)
			} else {
				other.Add(1)
			}
		})
		close(done)
	}()
	spout, bolt, flood := a.Sender(0), a.Sender(1), a.Sender(2)
	stop := make(chan struct{})
	flooded := make(chan int)
	// The flood sends and flushes batches of 256 under floodMu, counting
	// its ACKs (floodAcks), so that the test can pause it between batches
	// and know how many ACKs the shard has been sent.
	var floodMu sync.Mutex
	floodAcks := 0
	go func() {
		n := 0
		rng := rand.New(rand.NewPCG(5, 6))
		for {
			select {
			case <-stop:
				flooded <- n
				return
			default:
			}
			floodMu.Lock()
			for range 256 {
				kind := []ackcore.Kind{ackcore.Ack, ackcore.Fail, ackcore.Reset}[rng.IntN(3)]
				if err := flood.Send(ackcore.Msg{Root: rng.Uint64() | 1, Kind: kind, Val: rng.Uint64() | 1}); err != nil {
					t.Error(err)
				}
				if kind == ackcore.Ack {
					floodAcks++
				}
				n++
			}
			if err := flood.Flush(); err != nil {
				t.Error(err)
			}
			floodMu.Unlock()
		}
	}()
	// earlyApplied waits until the shard has applied every ACK sent so
	// far (Stats, published at ticks, counts refused ones too), the flood
	// paused meanwhile: the bolt's early ACKs are then in the shard before
	// their INITs are sent.
	acks := 0 // the bolt's and the spout's
	earlyApplied := func() {
		floodMu.Lock()
		defer floodMu.Unlock()
		want := uint64(acks + floodAcks)
		if err := await(5*time.Second, "the early ACKs applied",
			func() bool { return a.Stats().Acks >= want },
			func() string { return fmt.Sprintf("%d of %d ACKs applied", a.Stats().Acks, want) }); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for base := 0; base < roots; base += window {
		var inits []ackcore.Msg
		for i := range window {
			root := uint64(base+i+1) * splitmix.Golden
			e1, e2 := rng.Uint64()|1, rng.Uint64()|1
			// The bolt's ACK of the first edge races ahead of the INIT.
			if err := bolt.Send(ackcore.Msg{Root: root, Kind: ackcore.Ack, Val: e1}); err != nil {
				t.Fatal(err)
			}
			inits = append(inits, ackcore.Msg{Root: root, Kind: ackcore.Init, Val: e1 ^ e2}, ackcore.Msg{Root: root, Kind: ackcore.Ack, Val: e2})
		}
		if err := bolt.Flush(); err != nil {
			t.Fatal(err)
		}
		acks += window
		earlyApplied()
		if err := spout.SendBatch(inits); err != nil {
			t.Fatal(err)
		}
		acks += window
		if err := spout.Flush(); err != nil {
			t.Fatal(err)
		}
		// An early ACK lost: its tree would only time out.
		if err := await(5*time.Second, "an outcome for every tree so far",
			func() bool { return completed.Load()+other.Load() >= int64(base+window) },
			func() string {
				return fmt.Sprintf("%d outcomes after %d trees", completed.Load()+other.Load(), base+window)
			}); err != nil {
			t.Error(err)
			break
		}
		if t.Failed() {
			break
		}
	}
	close(stop)
	n := receiveWithin(t, flooded, "the flood's last batch")
	st := a.Stop()
	receiveWithin(t, done, "the receiver's Run returning after Stop")
	if t.Failed() || other.Load() != 0 || int(completed.Load()) != roots {
		t.Fatalf("%d roots: %d completed, %d other; stats %+v", roots, completed.Load(), other.Load(), st)
	}
	if a.OrphansRefused(0) != 0 || a.OrphansRefused(1) != 0 {
		t.Fatalf("spout or bolt refused: %d, %d", a.OrphansRefused(0), a.OrphansRefused(1))
	}
	if r := a.OrphansRefused(2); r != st.OrphansRefused || int(r) < n-share || st.RefusedFull != 0 {
		t.Fatalf("flooder sent %d, %d refused (share %d); stats %+v", n, r, share, st)
	}
	t.Logf("%d trees completed beside %d flooded messages, %d refused; %d orphans evicted", roots, n, st.OrphansRefused, st.OrphansEvicted)
}
