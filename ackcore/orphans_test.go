package ackcore_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/acktest"
	"github.com/xorack/xorack/internal/testkit"
)

// TestOrphansGiveWay: at the bound, an INIT evicts the oldest entry made
// without INIT, an ACK for an unknown root takes the oldest orphan's place,
// and with only live roots in the table both are refused.
func TestOrphansGiveWay(t *testing.T) {
	const bound = 100
	s, _ := newShard(t, bound)
	// Half live roots, half orphans (ACKs for roots never INITed).
	var msgs []ackcore.Msg
	for r := uint64(1); r <= bound/2; r++ {
		msgs = append(msgs, acktest.InitMsg(r, 1, r))
	}
	for r := uint64(1001); r <= 1000+bound/2; r++ {
		msgs = append(msgs, acktest.AckMsg(r, r))
	}
	none(t, s.Apply(msgs, nil))
	// New INITs evict the orphans, oldest first: none is refused.
	msgs = msgs[:0]
	for r := uint64(2001); r <= 2000+bound/2; r++ {
		msgs = append(msgs, acktest.InitMsg(r, 2, r))
	}
	none(t, s.Apply(msgs[:10], nil))
	st := s.Stats()
	if st.OrphansEvicted != 10 || st.FailedFull != 0 || st.Pending != bound {
		t.Fatalf("after 10 INITs at the bound: %+v", st)
	}
	// The oldest went: 1001..1010 are gone (an ACK recreates 1001 in
	// the place of the next oldest, 1011), 1011.. are there.
	none(t, s.Apply([]ackcore.Msg{acktest.AckMsg(1001, 5)}, nil))
	if st := s.Stats(); st.OrphansEvicted != 11 || st.RefusedFull != 0 {
		t.Fatalf("ACK at the bound: %+v", st)
	}
	// An INIT of 1012 adopts its orphan: val 1012 ^ 1012 = 0, completed.
	if o := one(t, s.Apply([]ackcore.Msg{acktest.InitMsg(1012, 3, 1012)}, nil)); o.Kind != ackcore.Completed || o.Task != 3 {
		t.Fatalf("INIT of a queued orphan: %+v", o)
	}
	none(t, s.Apply(msgs[10:], nil))
	// 1001 and 1013..1050 (39 orphans) made room for 40 INITs, plus
	// the completed 1012's slot.
	st = s.Stats()
	if st.FailedFull != 0 || st.Pending != bound {
		t.Fatalf("%+v", st)
	}
	// Only live roots now: an INIT is refused Full, and so is an ACK
	// for an unknown root.
	if o := one(t, s.Apply([]ackcore.Msg{acktest.InitMsg(9999, 1, 1)}, nil)); o.Reason != ackcore.ReasonFull {
		t.Fatalf("INIT with only live roots: %+v", o)
	}
	if o := one(t, s.Apply([]ackcore.Msg{acktest.AckMsg(9998, 1)}, nil)); o.Kind != ackcore.Refused || o.Reason != ackcore.ReasonFull {
		t.Fatalf("ACK with only live roots: %+v", o)
	}
	// Every live root still completes.
	msgs = msgs[:0]
	for r := uint64(1); r <= bound/2; r++ {
		msgs = append(msgs, acktest.AckMsg(r, r))
	}
	for r := uint64(2001); r <= 2000+bound/2; r++ {
		msgs = append(msgs, acktest.AckMsg(r, r))
	}
	if out := s.Apply(msgs, nil); len(out) != bound {
		t.Fatalf("%d completions of %d live roots", len(out), bound)
	}
	mustVerify(t, s)
}

// TestOrphanStormShard: 5% of roots failed after a fan-out of 4, their
// other three ACKs still arriving afterwards, at a small bound and a 30 s
// timeout that never passes: every root not failed completes, no INIT is
// refused, and the orphans' memory stays within Bytes.
func TestOrphanStormShard(t *testing.T) {
	testkit.SkipUnderRace(t, "a shard on one goroutine: nothing for the race detector to watch")
	testkit.SkipUnderInvariants(t, "400,000 roots at a bound of 4,096: the invariant checks (O(table) a step) take minutes; the differential tests run them")
	const bound, roots, window = 4096, 400_000, 1000
	clock := &ackcore.FakeClock{}
	cfg := ackcore.Config{MaxPending: bound, Timeout: 30 * time.Second, Clock: clock, Seed: 7}
	s := mustShard(t, cfg)
	rng := rand.New(rand.NewPCG(3, 4))
	// A tree's messages after its INIT: a healthy one acks its four
	// edges; a failed one sends its FAIL, then the same four ACKs (late).
	type tree struct{ msgs []ackcore.Msg }
	var live []tree
	var out []ackcore.Outcome
	failed, completed, peak := 0, 0, 0
	for made := 0; made < roots || len(live) > 0; {
		var batch []ackcore.Msg
		for len(live) < window && made < roots { // keep window trees in flight
			root := rng.Uint64() | 1
			var tr tree
			if rng.IntN(20) == 0 {
				tr.msgs = append(tr.msgs, acktest.FailMsg(root))
			}
			val := uint64(0)
			for range 4 {
				e := rng.Uint64() | 1
				val ^= e
				tr.msgs = append(tr.msgs, acktest.AckMsg(root, e))
			}
			batch = append(batch, acktest.InitMsg(root, 0, val))
			live = append(live, tr)
			made++
		}
		for i := 0; i < len(live); { // trees advance at random speeds
			if tr := &live[i]; rng.IntN(2) == 0 {
				batch = append(batch, tr.msgs[0])
				if tr.msgs = tr.msgs[1:]; len(tr.msgs) == 0 {
					live[i] = live[len(live)-1]
					live = live[:len(live)-1]
					continue
				}
			}
			i++
		}
		out = s.Apply(batch, out[:0])
		c, f := acktest.Tally(t, out, ackcore.ReasonExplicit)
		completed, failed = completed+c, failed+f
		peak = max(peak, s.TableBytes())
	}
	st := s.Stats()
	if st.FailedFull != 0 || st.FailedTimeout != 0 {
		t.Fatalf("refused or timed out: %+v", st)
	}
	if int(st.FailedExplicit) != failed || completed+failed != roots {
		t.Fatalf("completed %d + failed %d of %d roots; stats %+v", completed, failed, roots, st)
	}
	if st.OrphansEvicted == 0 {
		t.Fatalf("the storm never reached the bound: %+v", st)
	}
	if int64(peak) > cfg.Bytes() {
		t.Fatalf("peak %d bytes over Bytes() %d", peak, cfg.Bytes())
	}
	t.Logf("%d completed, %d failed, %d orphans evicted, peak %d B (Bytes %d)", completed, failed, st.OrphansEvicted, peak, cfg.Bytes())
}

// TestFailFlood: a flood of late FAILs for roots with no entry (1.1x, 2x,
// 4x MaxPending), then fresh INITs: at most 1% of them fail for a FAIL
// they never had; FAILs past the filter's budget are dropped and counted;
// after two timeouts the filter is empty.
func TestFailFlood(t *testing.T) {
	testkit.SkipUnderInvariants(t, "a bound of 65,536: the invariant checks (O(table) a step) take minutes; the differential tests run them")
	for _, x := range []float64{1.1, 2, 4} {
		const bound, fresh = 65536, 10_000
		clock := &ackcore.FakeClock{}
		cfg := ackcore.Config{MaxPending: bound, Timeout: 30 * time.Second, Clock: clock, Seed: 9}
		s := mustShard(t, cfg)
		base := s.TableBytes()
		rng := rand.New(rand.NewPCG(5, uint64(x*10)))
		n := int(x * bound)
		batch := make([]ackcore.Msg, 0, 256)
		var out []ackcore.Outcome
		for i := 0; i < n; i++ { // over one second
			batch = append(batch, acktest.FailMsg(rng.Uint64()|1))
			if len(batch) == cap(batch) || i == n-1 {
				none(t, s.Apply(batch, out[:0]))
				batch = batch[:0]
				clock.Add(time.Second / time.Duration(n/256+1))
			}
		}
		clock.Add(2 * time.Second)
		falsely, refused := 0, 0
		for i := 0; i < fresh; i++ {
			out = s.Apply([]ackcore.Msg{acktest.InitMsg(rng.Uint64()|1, 1, 1)}, out[:0])
			for _, o := range out {
				switch {
				case o.Reason == ackcore.ReasonExplicit:
					falsely++
				case o.Reason == ackcore.ReasonFull:
					refused++
				}
			}
		}
		st := s.Stats()
		if falsely > fresh/100 || refused != 0 {
			t.Fatalf("flood %.1fx: %d of %d fresh INITs failed explicit, %d full; stats %+v", x, falsely, fresh, refused, st)
		}
		if st.FailsDropped == 0 && x >= 2 {
			t.Fatalf("flood %.1fx: nothing dropped past the budget: %+v", x, st)
		}
		if st.FailsFiltered > 2*uint64(s.FailBudget()) {
			t.Fatalf("flood %.1fx: %d FAILs filtered, over two budgets of %d", x, st.FailsFiltered, s.FailBudget())
		}
		t.Logf("flood %.1fx: %d/%d fresh INITs failed by the filter; filtered %d, dropped %d, evicted %d", x, falsely, fresh, st.FailsFiltered, st.FailsDropped, st.OrphansEvicted)
		// Two timeouts on, everything has expired and the filter is gone.
		for range 3 {
			clock.Add(30 * time.Second)
			for more := true; more; {
				out, more = s.Expire(out[:0])
			}
			s.Apply(nil, nil)
		}
		// The fresh INITs time out; then a new INIT is not checked against
		// anything: the fast path takes it (no filter), and TableBytes is
		// back to the table alone.
		if got := s.TableBytes(); got > base+orphanInitialBytes {
			t.Fatalf("flood %.1fx: %d bytes held after two timeouts, %d before the flood", x, got, base)
		}
		mustVerify(t, s)
	}
}

// orphanInitialBytes is the orphan FIFO's initial ring, which a shard keeps
// once it has had an orphan.
const orphanInitialBytes = 8 << 10

// TestDrain: a FAIL that carries the failed tuple's ack val reports the
// root Failed and leaves a drain owing the tree's tuples still in flight;
// their ACKs empty it, the last removes it silently. A FAIL without a val
// removes the entry, and the same late ACKs then make an orphan. Each in
// one Apply per message and in one batch (the fast paths must stop at a
// drain's last ACK).
func TestDrain(t *testing.T) {
	const e1, e2, c1, c2 = 0x11, 0x22, 0x33, 0x44 // edge ids
	// The spout emitted e1 and e2; the bolt of e1 anchored c1 and acked;
	// the bolt of e2 anchored c2 and failed e2; c1 and c2 are acked later.
	withVal := []ackcore.Msg{acktest.InitMsg(7, 3, e1^e2), acktest.AckMsg(7, e1^c1), {Root: 7, Kind: ackcore.Fail, Val: e2 ^ c2}, acktest.AckMsg(7, c1), acktest.AckMsg(7, c2)}
	bare := []ackcore.Msg{acktest.InitMsg(8, 3, e1^e2), acktest.AckMsg(8, e1^c1), acktest.FailMsg(8), acktest.AckMsg(8, c1), acktest.AckMsg(8, c2)}
	for _, batch := range []bool{false, true} {
		s, _ := newShard(t, 100)
		var out []ackcore.Outcome
		pending := []int{1, 1, 1, 1, 0} // after each message
		for i, m := range withVal {
			if !batch {
				out = s.Apply([]ackcore.Msg{m}, out)
				if got := s.Stats().Pending; got != pending[i] {
					t.Fatalf("after message %d (%v): %d pending, want %d", i, m.Kind, got, pending[i])
				}
			}
		}
		if batch {
			out = s.Apply(withVal, out)
		}
		st := s.Stats()
		if len(out) != 1 || out[0].Kind != ackcore.Failed || out[0].Reason != ackcore.ReasonExplicit || out[0].Task != 3 {
			t.Fatalf("batch %v: outcomes %+v, want one Failed{explicit} for task 3", batch, out)
		}
		if st.Pending != 0 || st.OrphansDrained != 1 || st.FailedExplicit != 1 || st.Acks != 3 || st.Fails != 1 {
			t.Fatalf("batch %v: after the drain's last ACK: %+v", batch, st)
		}
		// Without a val the FAIL removes the entry, and c1's ACK makes
		// an orphan that c2's cannot end.
		out = s.Apply(bare, out[:0])
		if st := s.Stats(); len(out) != 1 || out[0].Kind != ackcore.Failed || st.Pending != 1 || st.OrphansDrained != 1 {
			t.Fatalf("batch %v: a FAIL without a val: %+v, %+v", batch, out, st)
		}
	}
}

// TestDrainGivesWay: drains are orphans: at the bound INITs evict them,
// oldest first, and a sender at its orphan share gets none (its FAIL
// removes the entry as a FAIL without a val does).
func TestDrainGivesWay(t *testing.T) {
	const bound = 50
	s, _ := newShard(t, bound)
	var msgs []ackcore.Msg
	for r := uint64(1); r <= bound; r++ {
		msgs = append(msgs, acktest.InitMsg(r, 1, 3), ackcore.Msg{Root: r, Kind: ackcore.Fail, Val: 1}) // 2 still owed
	}
	if out := s.Apply(msgs, nil); len(out) != bound {
		t.Fatalf("%d outcomes for %d FAILs", len(out), bound)
	}
	if st := s.Stats(); st.Pending != bound || st.OrphansDrained != 0 {
		t.Fatalf("after %d FAILs with a val: %+v", bound, st)
	}
	// The table is at its bound, all drains: new INITs evict the oldest.
	none(t, s.Apply([]ackcore.Msg{acktest.InitMsg(101, 1, 5), acktest.InitMsg(102, 1, 5)}, nil))
	if st := s.Stats(); st.OrphansEvicted != 2 || st.FailedFull != 0 || st.Pending != bound {
		t.Fatalf("INITs at a bound of drains: %+v", st)
	}
	// Roots 1 and 2 went first: their last ACKs now make orphans (taking
	// the places of drains 3 and 4); root 5's drains as it should.
	none(t, s.Apply([]ackcore.Msg{acktest.AckMsg(1, 2), acktest.AckMsg(2, 2), acktest.AckMsg(5, 2)}, nil))
	if st := s.Stats(); st.OrphansDrained != 1 || st.OrphansEvicted != 4 {
		t.Fatalf("late ACKs of evicted and live drains: %+v", st)
	}

	// An orphan share of 1: the first FAIL with a val leaves a drain, the
	// second (its owner is at its share) removes its entry.
	s2 := mustShard(t, ackcore.Config{MaxPending: 100, Clock: &ackcore.FakeClock{}, Owners: 2, OrphanShare: 1})
	s2.SetOwner(1)
	s2.Apply([]ackcore.Msg{acktest.InitMsg(1, 1, 3), acktest.InitMsg(2, 1, 3), {Root: 1, Kind: ackcore.Fail, Val: 1}, {Root: 2, Kind: ackcore.Fail, Val: 1}}, nil)
	if st := s2.Stats(); st.Pending != 1 || s2.OwnerStats(1).Orphans != 1 {
		t.Fatalf("a sender at its share: %+v, owner %+v", st, s2.OwnerStats(1))
	}
}
