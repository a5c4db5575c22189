package ackcore_test

import (
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// TestOrphanShare: an owner at its OrphanShare makes no more orphans: its
// ACK, FAIL and RESET for unknown roots are refused, counted for it and in
// Stats.OrphansRefused, while another owner's early ACKs still make
// theirs and complete when their INITs come; an orphan that leaves (its
// INIT, expiry, eviction) gives its owner room again. Every owner count
// (Owners 1 to MaxOwners) and both fold modes: the owner shares the
// orphan entry's tag bits.
func TestOrphanShare(t *testing.T) {
	for _, owners := range []int{2, 3, 128, ackcore.MaxOwners} {
		for _, fold := range []ackcore.FoldMode{ackcore.FoldOff, ackcore.FoldOn} {
			const bound, share = 1000, 50
			clock := &ackcore.FakeClock{}
			s, err := ackcore.NewShard(ackcore.Config{MaxPending: bound, Timeout: time.Second, Clock: clock, Seed: 9, Fold: fold, Owners: owners, OrphanShare: share})
			if err != nil {
				t.Fatal(err)
			}
			flooder, good := owners-1, owners/2-1+owners%2 // apart, and in the owner bits' top and middle
			s.SetOwner(flooder)
			var msgs []ackcore.Msg
			for r := uint64(1); r <= 3*share; r++ {
				switch r % 3 {
				case 0:
					msgs = append(msgs, ack(1_000_000+r, r))
				case 1:
					msgs = append(msgs, fail(1_000_000+r))
				default:
					msgs = append(msgs, reset(1_000_000+r))
				}
			}
			out := s.Apply(msgs, nil)
			if len(out) != 2*share {
				t.Fatalf("owners %d fold %d: %d outcomes for %d messages past a share of %d", owners, fold, len(out), 3*share, share)
			}
			for _, o := range out {
				if o.Kind != ackcore.Refused || o.Reason != ackcore.ReasonFull || o.Task != ackcore.NoTask {
					t.Fatalf("owners %d fold %d: %+v", owners, fold, o)
				}
			}
			st := s.Stats()
			if st.OrphansRefused != 2*share || st.RefusedFull != 0 || st.Pending != share {
				t.Fatalf("owners %d fold %d: %+v", owners, fold, st)
			}
			if os := s.OwnerStats(flooder); os.Orphans != share || os.Refused != 2*share {
				t.Fatalf("owners %d fold %d: flooder %+v", owners, fold, os)
			}
			// The other owner's early ACKs make orphans; their INITs
			// (from owner 0, as a spout's producer) complete them.
			s.SetOwner(good)
			msgs = msgs[:0]
			for r := uint64(1); r <= share; r++ {
				msgs = append(msgs, ack(r, r))
			}
			none(t, s.Apply(msgs, nil))
			if os := s.OwnerStats(good); os.Orphans != share || os.Refused != 0 {
				t.Fatalf("owners %d fold %d: good owner %+v", owners, fold, os)
			}
			s.SetOwner(0)
			msgs = msgs[:0]
			for r := uint64(1); r <= share; r++ {
				msgs = append(msgs, init1(r, 1, r))
			}
			if out := s.Apply(msgs, nil); len(out) != share {
				t.Fatalf("owners %d fold %d: %d outcomes for %d adopted orphans", owners, fold, len(out), share)
			}
			if os := s.OwnerStats(good); os.Orphans != 0 {
				t.Fatalf("owners %d fold %d: good owner after its INITs %+v", owners, fold, os)
			}
			// The flooder is still at its share; when its orphans expire
			// it has room again.
			s.SetOwner(flooder)
			if o := one(t, s.Apply([]ackcore.Msg{ack(7, 7)}, nil)); o.Kind != ackcore.Refused {
				t.Fatalf("owners %d fold %d: %+v", owners, fold, o)
			}
			clock.Add(2 * time.Second)
			for more := true; more; _, more = s.Expire(make([]ackcore.Outcome, 0, 64)) {
			}
			if os := s.OwnerStats(flooder); os.Orphans != 0 {
				t.Fatalf("owners %d fold %d: flooder after expiry %+v", owners, fold, os)
			}
			none(t, s.Apply([]ackcore.Msg{ack(7, 7)}, nil))
			if os := s.OwnerStats(flooder); os.Orphans != 1 || os.Refused != 2*share+1 {
				t.Fatalf("owners %d fold %d: flooder %+v", owners, fold, os)
			}
			if err := s.Verify(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestOrphanShareNone: with no share (the default) and one owner, an owner
// may fill the table with orphans, and an ACK at the bound takes the
// oldest orphan's place, as before owners were counted.
func TestOrphanShareNone(t *testing.T) {
	const bound = 100
	s, _ := newShard(t, bound, ackcore.FoldOff)
	var msgs []ackcore.Msg
	for r := uint64(1); r <= 2*bound; r++ {
		msgs = append(msgs, ack(r, r))
	}
	none(t, s.Apply(msgs, nil))
	st := s.Stats()
	if st.OrphansRefused != 0 || st.OrphansEvicted != bound || st.Pending != bound {
		t.Fatalf("%+v", st)
	}
	if os := s.OwnerStats(0); os.Orphans != bound || os.Refused != 0 {
		t.Fatalf("%+v", os)
	}
}

// TestOrphanShareEvicted: an orphan evicted by an INIT leaves its owner's
// count.
func TestOrphanShareEvicted(t *testing.T) {
	const bound = 100
	s, err := ackcore.NewShard(ackcore.Config{MaxPending: bound, Seed: 3, Owners: 2, OrphanShare: bound})
	if err != nil {
		t.Fatal(err)
	}
	s.SetOwner(1)
	var msgs []ackcore.Msg
	for r := uint64(1); r <= bound; r++ {
		msgs = append(msgs, ack(r, r))
	}
	none(t, s.Apply(msgs, nil))
	s.SetOwner(0)
	msgs = msgs[:0]
	for r := uint64(1); r <= 10; r++ {
		msgs = append(msgs, init1(1000+r, 1, r))
	}
	none(t, s.Apply(msgs, nil))
	if os, st := s.OwnerStats(1), s.Stats(); os.Orphans != bound-10 || st.OrphansEvicted != 10 {
		t.Fatalf("%+v %+v", os, st)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestOwnersValidate(t *testing.T) {
	for _, c := range []ackcore.Config{{MaxPending: 10, Owners: -1}, {MaxPending: 10, Owners: ackcore.MaxOwners + 1}, {MaxPending: 10, OrphanShare: -1}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	s, _ := ackcore.NewShard(ackcore.Config{MaxPending: 10, Owners: 2})
	defer func() {
		if recover() == nil {
			t.Error("SetOwner(2) of 2 owners did not panic")
		}
	}()
	s.SetOwner(2)
}
