package ackcore_test

import (
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// failv is a FAIL that carries the failed tuple's ack val: it leaves what
// the tree still owes as a drain (rule 3).
func failv(root, val uint64) ackcore.Msg {
	return ackcore.Msg{Root: root, Kind: ackcore.Fail, Val: val}
}

// TestDrainQueuedInPlace: a drain is a new orphan, queued at the place of
// the FAIL that made it, after an orphan made by an earlier message of
// the batch: eviction at the bound takes the orphans oldest first.
func TestDrainQueuedInPlace(t *testing.T) {
	const bound = 20
	s, _ := newShard(t, bound)
	// Orphans 1 and 3; then one batch: orphan 101, the INIT of tree
	// 102 (edges 0x10, 0x20), orphan 103, then 102's FAIL for edge
	// 0x10: a drain owing 0x20, made after orphan 103.
	none(t, s.Apply([]ackcore.Msg{ack(1, 1), ack(3, 3)}, nil))
	out := s.Apply([]ackcore.Msg{ack(101, 1), init1(102, 4, 0x10^0x20), ack(103, 3), failv(102, 0x10)}, nil)
	if o := one(t, out); o.Root != 102 || o.Kind != ackcore.Failed || o.Reason != ackcore.ReasonExplicit {
		t.Fatalf("FAIL of tree 102: %+v", o)
	}
	// Entries: orphans 1, 3, 101, 103 and drain 102. Fill the bound
	// with live roots, then four INITs evict the four oldest orphans:
	// 1, 3, 101 and 103, not the drain.
	var msgs []ackcore.Msg
	for r := uint64(1000); s.Pending()+len(msgs) < bound; r++ {
		msgs = append(msgs, init1(r, 1, r))
	}
	none(t, s.Apply(msgs, nil))
	none(t, s.Apply([]ackcore.Msg{init1(2001, 1, 1), init1(2002, 1, 1), init1(2003, 1, 1), init1(2004, 1, 1)}, nil))
	if st := s.Stats(); st.OrphansEvicted != 4 || st.FailedFull != 0 {
		t.Fatalf("after 4 INITs at the bound: %+v", st)
	}
	// The drain is still there: the tree's last ACK ends it.
	none(t, s.Apply([]ackcore.Msg{ack(102, 0x20)}, nil))
	if st := s.Stats(); st.OrphansDrained != 1 || st.OrphansEvicted != 4 {
		t.Fatalf("the drain was evicted before the orphans made before it: %+v", st)
	}
	if err := s.Verify(); err != nil {
		t.Fatalf("%v", err)
	}
}

// TestDrainOfAdoptedOrphan: an early ACK's orphan (owner 1), adopted by
// its INIT and left as a drain by its FAIL in one batch of owner 2,
// counts as owner 1's orphan gone and owner 2's made: the counts stay
// exact (owner 1 is not held at its share by an orphan that left), the
// drain carries owner 2 and a live tag, and so it gives way at the bound
// and its end is counted against owner 2.
func TestDrainOfAdoptedOrphan(t *testing.T) {
	const bound, share = 16, 2
	clock := &ackcore.FakeClock{}
	s := mustShard(t, ackcore.Config{MaxPending: bound, Timeout: time.Second, Clock: clock, Seed: 5, Owners: 3, OrphanShare: share})
	counts := func(when string, want ...int) {
		t.Helper()
		for o, n := range want {
			if got := s.OwnerStats(o).Orphans; got != n {
				t.Fatalf("%s: owner %d has %d orphans, want %d", when, o, got, n)
			}
		}
		if err := s.Verify(); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}
	// Owner 1: two early ACKs (orphans 7 and 8; 8's tag is not the
	// FIFO's first).
	s.SetOwner(1)
	none(t, s.Apply([]ackcore.Msg{ack(7, 0x1), ack(8, 0x2)}, nil))
	counts("early ACKs", 0, 2, 0)
	// Owner 2, one batch: 8's INIT (edges 0x2, 0x4, 0x8) adopts it, its
	// FAIL for edge 0x4 leaves a drain owing 0x8.
	s.SetOwner(2)
	if o := one(t, s.Apply([]ackcore.Msg{init1(8, 3, 0x2^0x4^0x8), failv(8, 0x4)}, nil)); o.Kind != ackcore.Failed {
		t.Fatalf("FAIL of 8: %+v", o)
	}
	counts("drain", 0, 1, 1)
	// Owner 1 is under its share again: a new early ACK is kept.
	s.SetOwner(1)
	none(t, s.Apply([]ackcore.Msg{ack(9, 0x1)}, nil))
	counts("owner 1 again", 0, 2, 1)
	// 7 and 9 adopted and completed: the drain is the only orphan.
	if out := s.Apply([]ackcore.Msg{init1(7, 1, 0x1), init1(9, 1, 0x1)}, nil); len(out) != 2 {
		t.Fatalf("adopting 7 and 9: %v", out)
	}
	counts("adopted", 0, 0, 1)
	// At the bound, an INIT evicts the drain (its tag is live).
	var msgs []ackcore.Msg
	for r := uint64(1000); s.Pending()+len(msgs) < bound; r++ {
		msgs = append(msgs, init1(r, 1, r))
	}
	none(t, s.Apply(msgs, nil))
	none(t, s.Apply([]ackcore.Msg{init1(2000, 1, 1)}, nil))
	if st := s.Stats(); st.OrphansEvicted != 1 || st.FailedFull != 0 {
		t.Fatalf("INIT at the bound with the drain as the only orphan: %+v", st)
	}
	counts("evicted", 0, 0, 0)
}

// TestDrainEndsAgainstItsOwner: an early ACK's orphan adopted and left
// as a drain in one batch, then emptied by the tree's last
// ACK, leaves its owner's count at 0: the owner keeps its whole share.
func TestDrainEndsAgainstItsOwner(t *testing.T) {
	clock := &ackcore.FakeClock{}
	s := mustShard(t, ackcore.Config{MaxPending: 64, Timeout: time.Second, Clock: clock, Seed: 6, Owners: 2, OrphanShare: 3})
	s.SetOwner(1)
	none(t, s.Apply([]ackcore.Msg{ack(5, 0x1)}, nil))
	one(t, s.Apply([]ackcore.Msg{init1(5, 2, 0x1^0x2^0x4), failv(5, 0x2)}, nil))
	if n := s.OwnerStats(1).Orphans; n != 1 {
		t.Fatalf("owner 1 has %d orphans with one drain", n)
	}
	none(t, s.Apply([]ackcore.Msg{ack(5, 0x4)}, nil))
	if st := s.Stats(); st.OrphansDrained != 1 || st.Pending != 0 {
		t.Fatalf("%+v", st)
	}
	// The whole share again: three early ACKs kept, the fourth refused.
	out := s.Apply([]ackcore.Msg{ack(10, 1), ack(11, 1), ack(12, 1), ack(13, 1)}, nil)
	if o := one(t, out); o.Root != 13 || o.Kind != ackcore.Refused {
		t.Fatalf("owner 1's share after its drain ended: %v", out)
	}
	for o := range s.Owners() {
		want := []int{0, 3}[o]
		if n := s.OwnerStats(o).Orphans; n != want {
			t.Fatalf("owner %d has %d orphans, want %d", o, n, want)
		}
	}
	if err := s.Verify(); err != nil {
		t.Fatalf("%v", err)
	}
}
