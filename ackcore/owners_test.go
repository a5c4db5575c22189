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
// (Owners 1 to MaxOwners): the owner shares the orphan entry's tag bits.
func TestOrphanShare(t *testing.T) {
	for _, owners := range []int{2, 3, 128, ackcore.MaxOwners} {
		const bound, share = 1000, 50
		clock := &ackcore.FakeClock{}
		s := mustShard(t, ackcore.Config{MaxPending: bound, Timeout: time.Second, Clock: clock, Seed: 9, Owners: owners, OrphanShare: share})
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
			t.Fatalf("owners %d: %d outcomes for %d messages past a share of %d", owners, len(out), 3*share, share)
		}
		for _, o := range out {
			if o.Kind != ackcore.Refused || o.Reason != ackcore.ReasonFull || o.Task != ackcore.NoTask {
				t.Fatalf("owners %d: %+v", owners, o)
			}
		}
		st := s.Stats()
		if st.OrphansRefused != 2*share || st.RefusedFull != 0 || st.Pending != share {
			t.Fatalf("owners %d: %+v", owners, st)
		}
		if os := s.OwnerStats(flooder); os.Orphans != share || os.Refused != 2*share {
			t.Fatalf("owners %d: flooder %+v", owners, os)
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
			t.Fatalf("owners %d: good owner %+v", owners, os)
		}
		s.SetOwner(0)
		msgs = msgs[:0]
		for r := uint64(1); r <= share; r++ {
			msgs = append(msgs, init1(r, 1, r))
		}
		if out := s.Apply(msgs, nil); len(out) != share {
			t.Fatalf("owners %d: %d outcomes for %d adopted orphans", owners, len(out), share)
		}
		if os := s.OwnerStats(good); os.Orphans != 0 {
			t.Fatalf("owners %d: good owner after its INITs %+v", owners, os)
		}
		// The flooder is still at its share; when its orphans expire
		// it has room again.
		s.SetOwner(flooder)
		if o := one(t, s.Apply([]ackcore.Msg{ack(7, 7)}, nil)); o.Kind != ackcore.Refused {
			t.Fatalf("owners %d: %+v", owners, o)
		}
		clock.Add(2 * time.Second)
		for more := true; more; _, more = s.Expire(make([]ackcore.Outcome, 0, 64)) {
		}
		if os := s.OwnerStats(flooder); os.Orphans != 0 {
			t.Fatalf("owners %d: flooder after expiry %+v", owners, os)
		}
		none(t, s.Apply([]ackcore.Msg{ack(7, 7)}, nil))
		if os := s.OwnerStats(flooder); os.Orphans != 1 || os.Refused != 2*share+1 {
			t.Fatalf("owners %d: flooder %+v", owners, os)
		}
		mustVerify(t, s)
	}
}

// TestOrphanShareNone: with no share (the default) and one owner, an owner
// may fill the table with orphans, and an ACK at the bound takes the
// oldest orphan's place, as before owners were counted.
func TestOrphanShareNone(t *testing.T) {
	const bound = 100
	s, _ := newShard(t, bound)
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
	s := mustShard(t, ackcore.Config{MaxPending: bound, Seed: 3, Owners: 2, OrphanShare: bound})
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
	mustVerify(t, s)
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

// TestOrphanShareKeepsOthers: at the bound, the orphan that gives way is
// the flooder's own, oldest first, never another sender's while the
// flooder holds more. Owner 0 has 600 live roots and 100 early ACKs
// (ACKs that raced their INITs); owner 1 sends 5,000 ACKs for roots that
// never come. All 100 early ACKs survive, and their trees complete when
// their INITs arrive.
func TestOrphanShareKeepsOthers(t *testing.T) {
	const bound, share = 1000, 500
	clock := &ackcore.FakeClock{}
	s := mustShard(t, ackcore.Config{MaxPending: bound, Timeout: time.Minute, Clock: clock, Seed: 11, Owners: 2, OrphanShare: share})
	s.SetOwner(0)
	var msgs []ackcore.Msg
	for r := uint64(1); r <= 600; r++ {
		msgs = append(msgs, init1(r, 1, r))
	}
	for r := uint64(10_001); r <= 10_100; r++ { // early ACKs: edge r of root r
		msgs = append(msgs, ack(r, r))
	}
	none(t, s.Apply(msgs, nil))
	s.SetOwner(1)
	msgs = msgs[:0]
	for r := uint64(100_001); r <= 105_000; r++ {
		msgs = append(msgs, ack(r, 1))
	}
	var refused int
	for i := 0; i < len(msgs); i += 256 {
		for _, o := range s.Apply(msgs[i:min(i+256, len(msgs))], nil) {
			if o.Kind != ackcore.Refused {
				t.Fatalf("flood ACK answered %+v", o)
			}
			refused++
		}
	}
	if os := s.OwnerStats(0); os.Orphans != 100 {
		t.Fatalf("owner 0 keeps %d of its 100 early ACKs (%+v)", os.Orphans, s.Stats())
	}
	st := s.Stats()
	if st.OrphansEvicted == 0 || int(st.OrphansEvicted)+refused+s.OwnerStats(1).Orphans != 5000 {
		t.Fatalf("%d flood ACKs evicted, %d refused, %d held: %+v", st.OrphansEvicted, refused, s.OwnerStats(1).Orphans, st)
	}
	// The INITs of the 100 early-ACKed roots (edges r and r+1): each
	// adopts its orphan, and the last ACK completes it.
	s.SetOwner(0)
	msgs = msgs[:0]
	for r := uint64(10_001); r <= 10_100; r++ {
		msgs = append(msgs, init1(r, 2, r^(r+1)))
	}
	none(t, s.Apply(msgs, nil))
	msgs = msgs[:0]
	for r := uint64(10_001); r <= 10_100; r++ {
		msgs = append(msgs, ack(r, r+1))
	}
	completed := 0
	for _, o := range s.Apply(msgs, nil) {
		if o.Kind == ackcore.Completed {
			completed++
		}
	}
	if completed != 100 {
		t.Fatalf("%d of the 100 early-ACKed trees completed", completed)
	}
	if err := s.Verify(); err != nil {
		t.Fatalf("%v", err)
	}
}

// TestOrphanEvictionMostOver: with three owners holding orphans at the
// bound, each eviction takes the oldest orphan of the owner holding the
// most (the lowest such owner on a tie), so the counts level down from
// the top: 10/20/30 orphans and 25 evictions leave 10/12/13, owners 1 and
// 2 losing their oldest.
func TestOrphanEvictionMostOver(t *testing.T) {
	const bound = 100
	s := mustShard(t, ackcore.Config{MaxPending: bound, Seed: 12, Owners: 3})
	base := []uint64{1000, 2000, 3000}
	for o, n := range []int{10, 20, 30} { // owner 2's are the newest
		s.SetOwner(o)
		var msgs []ackcore.Msg
		for i := range n {
			msgs = append(msgs, ack(base[o]+uint64(i), 1))
		}
		none(t, s.Apply(msgs, nil))
	}
	s.SetOwner(0)
	var msgs []ackcore.Msg
	for r := uint64(1); r <= bound-60+25; r++ {
		msgs = append(msgs, init1(r, 1, r))
	}
	none(t, s.Apply(msgs, nil))
	for o, want := range []int{10, 12, 13} {
		if n := s.OwnerStats(o).Orphans; n != want {
			t.Fatalf("owner %d has %d orphans, want %d", o, n, want)
		}
	}
	// Owner 2's first 17 went, 3017 on are kept: an ACK to a kept orphan
	// finds its entry, one to an evicted root needs a new one, and at the
	// bound that evicts again.
	evicted := s.Stats().OrphansEvicted
	s.SetOwner(2)
	for _, c := range []struct {
		root uint64
		more uint64
	}{{3017, 0}, {2008, 0}, {3016, 1}, {2007, 1}} {
		none(t, s.Apply([]ackcore.Msg{ack(c.root, 1)}, nil))
		if n := s.Stats().OrphansEvicted; n-evicted != c.more {
			t.Fatalf("ACK to orphan %d: %d evictions, want %d", c.root, n-evicted, c.more)
		}
		evicted = s.Stats().OrphansEvicted
	}
	mustVerify(t, s)
}
