package baseline_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/bench/internal/baseline"
	"github.com/xorack/xorack/internal/acktest"
	"github.com/xorack/xorack/internal/acktest/treegen"
)

const stormT = 10 * time.Second // Storm's message timeout in these tests: one rotation

func newStorm(t *testing.T) (*baseline.Storm, *ackcore.FakeClock) {
	t.Helper()
	clock := &ackcore.FakeClock{}
	s, err := baseline.NewStorm(baseline.Config{MaxPending: 1000, Timeout: stormT, Clock: clock}, baseline.StormOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s, clock
}

func expireNone(t *testing.T, a ackcore.Interface) {
	t.Helper()
	out, more := a.Expire(make([]ackcore.Outcome, 0, 8))
	if len(out) != 0 || more {
		t.Fatalf("Expire = %v, %v; Storm reports nothing", out, more)
	}
}

func TestStormCompletes(t *testing.T) {
	s, clock := newStorm(t)
	// A clean tree: spout edges a, b; b anchors c; acks in any order.
	const a, b, c = 0xa1, 0xb2, 0xc3
	out := s.Apply([]ackcore.Msg{acktest.AckMsg(1, b^c), acktest.InitMsg(1, 7, a^b)}, nil)
	clock.Add(3 * time.Millisecond)
	out = s.Apply([]ackcore.Msg{acktest.AckMsg(1, c), acktest.AckMsg(1, a)}, out)
	want := ackcore.Outcome{Root: 1, Task: 7, Kind: ackcore.Completed, Latency: 3 * time.Millisecond}
	if len(out) != 1 || out[0] != want {
		t.Fatalf("outcomes %v, want [%+v]", out, want)
	}
	// INIT with val 0 completes at once.
	if out = s.Apply([]ackcore.Msg{acktest.InitMsg(2, 1, 0)}, out[:0]); len(out) != 1 || out[0].Kind != ackcore.Completed {
		t.Fatalf("INIT 0: %v", out)
	}
	if st := s.Stats(); st.Completed != 2 || st.Pending != 0 || st.Inits != 2 || st.Acks != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestStormFail(t *testing.T) {
	s, _ := newStorm(t)
	// FAIL after INIT reports at once.
	out := s.Apply([]ackcore.Msg{acktest.InitMsg(1, 4, 0x5), acktest.FailMsg(1)}, nil)
	if len(out) != 1 || out[0].Kind != ackcore.Failed || out[0].Reason != ackcore.ReasonExplicit || out[0].Task != 4 {
		t.Fatalf("fail: %v", out)
	}
	// FAIL before INIT is remembered and reported when the INIT comes.
	if out = s.Apply([]ackcore.Msg{acktest.FailMsg(2), acktest.InitMsg(2, 5, 0x6)}, out[:0]); len(out) != 1 || out[0].Kind != ackcore.Failed || out[0].Task != 5 {
		t.Fatalf("fail before init: %v", out)
	}
	// Storm's corner (docs/semantics.md, rule 3): FAIL before INIT, and the val
	// reaches 0 with the INIT: Storm checks val first and acks.
	if out = s.Apply([]ackcore.Msg{acktest.FailMsg(3), acktest.AckMsg(3, 0x7), acktest.InitMsg(3, 6, 0x7)}, out[:0]); len(out) != 1 || out[0].Kind != ackcore.Completed {
		t.Fatalf("fail-vs-ack corner: %v, Storm reports Completed", out)
	}
	if st := s.Stats(); st.FailedExplicit != 2 || st.Completed != 1 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestStormExpiry: an entry is dropped, silently, at the third rotation
// after it was made, ACKs notwithstanding (they do not refresh it).
func TestStormExpiry(t *testing.T) {
	s, clock := newStorm(t)
	s.Apply([]ackcore.Msg{acktest.InitMsg(1, 2, 0x3), acktest.AckMsg(9, 0x4)}, nil) // 9: no INIT
	for i := 1; i <= 2; i++ {
		clock.Add(stormT)
		expireNone(t, s)
		if p := s.Stats().Pending; p != 2 {
			t.Fatalf("after rotation %d: %d pending, want 2", i, p)
		}
		s.Apply([]ackcore.Msg{acktest.AckMsg(1, 0x10)}, nil) // busy, but not refreshed
	}
	clock.Add(stormT)
	expireNone(t, s)
	st := s.Stats()
	if st.Pending != 0 || st.Orphans != 2 || s.DroppedInit() != 1 || st.FailedTimeout != 0 {
		t.Fatalf("after rotation 3: stats %+v, dropped with INIT %d", st, s.DroppedInit())
	}
	// A late ACK makes a new entry without a task; it completes nothing.
	if out := s.Apply([]ackcore.Msg{acktest.AckMsg(1, 0x3)}, nil); len(out) != 0 || s.Stats().Pending != 1 {
		t.Fatalf("late ack: %v, %+v", out, s.Stats())
	}
}

// TestStormReset: a RESET re-puts the entry into the newest bucket, so it
// survives the rotation that would have dropped it and can still complete.
func TestStormReset(t *testing.T) {
	s, clock := newStorm(t)
	s.Apply([]ackcore.Msg{acktest.InitMsg(1, 2, 0x3), acktest.InitMsg(2, 2, 0x3)}, nil)
	clock.Add(2 * stormT)
	expireNone(t, s)                                 // two rotations: both in the oldest bucket
	s.Apply([]ackcore.Msg{acktest.ResetMsg(1)}, nil) // 1 back to the newest
	clock.Add(stormT)
	expireNone(t, s) // third rotation: 2 is dropped, 1 is not
	if st := s.Stats(); st.Pending != 1 || st.Orphans != 1 || st.Resets != 1 {
		t.Fatalf("stats %+v", st)
	}
	if out := s.Apply([]ackcore.Msg{acktest.AckMsg(1, 0x3), acktest.AckMsg(2, 0x3)}, nil); len(out) != 1 || out[0].Root != 1 || out[0].Kind != ackcore.Completed {
		t.Fatalf("after reset: %v, want root 1 completed", out)
	}
	// Two more rotations keep it (now the 2's late ACK's entry), the third drops it.
	clock.Add(2 * stormT)
	expireNone(t, s)
	if p := s.Stats().Pending; p != 1 {
		t.Fatalf("%d pending", p)
	}
	clock.Add(stormT)
	expireNone(t, s)
	if p := s.Stats().Pending; p != 0 {
		t.Fatalf("%d pending after the third rotation", p)
	}
}

// TestStormIdleGap: after a gap of many timeouts, Expire rotates at most
// once per bucket and keeps its rotation schedule.
func TestStormIdleGap(t *testing.T) {
	s, clock := newStorm(t)
	s.Apply([]ackcore.Msg{acktest.InitMsg(1, 2, 0x3)}, nil)
	clock.Add(1000*stormT + stormT/2)
	expireNone(t, s)
	s.Apply([]ackcore.Msg{acktest.InitMsg(2, 2, 0x3)}, nil) // at 1000.5 T
	if st := s.Stats(); st.Orphans != 1 || st.Pending != 1 {
		t.Fatalf("stats %+v", st)
	}
	clock.Add(stormT / 2) // 1001 T: a rotation
	expireNone(t, s)
	clock.Add(stormT) // 1002 T
	expireNone(t, s)
	if p := s.Stats().Pending; p != 1 {
		t.Fatalf("%d pending after two rotations", p)
	}
	clock.Add(stormT) // 1003 T: the third rotation since root 2 was made
	expireNone(t, s)
	if p := s.Stats().Pending; p != 0 {
		t.Fatalf("%d pending after three rotations", p)
	}
}

// TestStormTreegen: over generated clean streams (no FAIL, any order,
// RESETs and custom timeouts that Storm ignores), every root completes
// exactly once.
func TestStormTreegen(t *testing.T) {
	seeds := 20
	if testing.Short() {
		seeds = 5
	}
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 1))
		evs, roots := treegen.Generate(rng, treegen.Options{
			Roots: 300, MaxFanout: 3, MaxDepth: 3, JoinProb: 0.2, ResetProb: 0.05,
			CustomProb: 0.05, MaxTimeout: 40, Tasks: 5,
		})
		evs, _ = treegen.Faults(rng, evs, 1+int(seed)*20, 0, 0)
		s, clock := newStorm(t)
		seen := map[uint64]int{}
		var out []ackcore.Outcome
		for len(evs) > 0 {
			n := min(1+rng.IntN(32), len(evs))
			batch := make([]ackcore.Msg, n)
			for i := range batch {
				batch[i] = evs[i].Msg
			}
			evs = evs[n:]
			out = s.Apply(batch, out[:0])
			for _, o := range out {
				if o.Kind != ackcore.Completed {
					t.Fatalf("seed %d: %+v", seed, o)
				}
				seen[o.Root]++
			}
			clock.Add(time.Millisecond) // far from a rotation
			expireNone(t, s)
		}
		for _, r := range roots {
			if seen[r] != 1 {
				t.Fatalf("seed %d: root %#x completed %d times", seed, r, seen[r])
			}
		}
		// RESETs and ACKs shuffled past their root's completion made
		// entries without INIT; three rotations drop them, silently.
		late := s.Stats().Pending
		clock.Add(3 * stormT)
		expireNone(t, s)
		if st := s.Stats(); st.Pending != 0 || st.Completed != uint64(len(roots)) || st.Orphans != uint64(late) || s.DroppedInit() != 0 {
			t.Fatalf("seed %d: stats %+v, dropped with INIT %d", seed, st, s.DroppedInit())
		}
	}
}
