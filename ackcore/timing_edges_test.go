package ackcore

import (
	"testing"
	"time"
)

// Roots whose deadline sits exactly on a boundary of the two timeout tiers
// (near.go): the near limit, the limit a pass moves to, and the pass's
// horizon when the pass starts late. Each is checked for the tier it lands
// in and for the tick it times out at, to the tick.

// edgeShard is a shard on a fake clock at 0 with 1 ms ticks, the default
// window (minWindow ticks for a small table) and limit one window ahead.
func edgeShard(t *testing.T) (*Shard, *FakeClock) {
	t.Helper()
	clock := &FakeClock{}
	s, err := NewShard(Config{MaxPending: 4096, Timeout: 30 * time.Second, Clock: clock, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if s.nowTick != 0 || s.window != minWindow || s.limit != minWindow || s.horizon != minWindow {
		t.Fatalf("new shard: now %d, window %d, limit %d, horizon %d; want 0, %d, %d, %d", s.nowTick, s.window, s.limit, s.horizon, minWindow, minWindow, minWindow)
	}
	return s, clock
}

// isNear reports whether root is pending with a near timer.
func isNear(t *testing.T, s *Shard, root uint64) bool {
	t.Helper()
	slot, found := s.t.find(root)
	if !found {
		t.Fatalf("root %#x not pending", root)
	}
	return s.t.e[slot].word().near()
}

// listings is how many times root is on the due lists.
func listings(s *Shard, root uint64) int {
	n := 0
	s.due.each(func(r, _ uint64) {
		if r == root {
			n++
		}
	})
	return n
}

// expireAt moves the clock to tick and returns the timeouts Expire reports
// there, checking each is a timeout whose latency is tick (all INITs are
// at 0) plus the half tick latency adds back.
func expireAt(t *testing.T, s *Shard, clock *FakeClock, tick uint64) map[uint64]bool {
	t.Helper()
	clock.Set(time.Duration(tick) * time.Millisecond)
	got := map[uint64]bool{}
	for _, o := range s.expireAll(nil) {
		want := time.Duration(tick)*time.Millisecond + time.Millisecond/2
		if o.Kind != Failed || o.Reason != ReasonTimeout || o.Latency != want {
			t.Fatalf("tick %d: %+v, want a timeout with latency %v", tick, o, want)
		}
		got[o.Root] = true
	}
	if err := s.verify(); err != nil {
		t.Fatalf("tick %d: %v", tick, err)
	}
	return got
}

func edgeInit(t *testing.T, s *Shard, root uint64, ms uint32) {
	t.Helper()
	if out := s.Apply([]Msg{{Root: root, Kind: Init, Val: 1, TimeoutMs: ms}}, nil); len(out) != 0 {
		t.Fatalf("INIT %#x: %v", root, out)
	}
}

// TestNearLimitEdges: with Expire called every tick, a deadline one tick
// before the limit gets a near timer and one exactly at the limit does not
// (a RESET to the limit takes the timer away); a far root whose deadline
// is exactly the limit a pass moves to stays off the due lists until the
// next pass lists it, once. Each times out exactly at its deadline. The
// INITs go through the assembly loop where the CPU has it, and through the
// rules (setDeadline) without it: each path compares with the limit.
func TestNearLimitEdges(t *testing.T) {
	t.Run("ackRun", func(t *testing.T) {
		if !haveAckRun {
			t.Skip("no assembly loop on this CPU")
		}
		nearLimitEdges(t)
	})
	t.Run("rules", func(t *testing.T) {
		defer SetAckRun(false)()
		nearLimitEdges(t)
	})
}

func nearLimitEdges(t *testing.T) {
	s, clock := edgeShard(t)
	lim := s.limit
	const (
		before = 0x1001 // deadline lim-1: near
		at     = 0x1003 // deadline lim: far
		moved  = 0x1005 // near at lim-2, then RESET to lim: far
		next   = 0x1007 // deadline 2*lim: the limit the first pass sets
	)
	edgeInit(t, s, before, uint32(lim-1))
	edgeInit(t, s, at, uint32(lim))
	edgeInit(t, s, moved, uint32(lim-2))
	edgeInit(t, s, next, uint32(2*lim))
	if !isNear(t, s, before) || !isNear(t, s, moved) {
		t.Fatalf("deadlines %d and %d, before limit %d: want near timers", lim-1, lim-2, lim)
	}
	if isNear(t, s, at) {
		t.Fatalf("deadline %d, exactly at limit %d: has a near timer, want it far", lim, lim)
	}
	if out := s.Apply([]Msg{{Root: moved, Kind: Reset, TimeoutMs: uint32(lim)}}, nil); len(out) != 0 {
		t.Fatalf("RESET: %v", out)
	}
	if isNear(t, s, moved) {
		t.Fatalf("RESET to deadline %d, exactly at limit %d: kept its near timer, want it far", lim, lim)
	}

	for tick := uint64(1); tick <= 2*lim; tick++ {
		got := expireAt(t, s, clock, tick)
		var want []uint64
		switch tick {
		case lim - 1:
			want = []uint64{before}
		case lim:
			want = []uint64{at, moved}
		case 2 * lim:
			want = []uint64{next}
		}
		if len(got) != len(want) {
			t.Fatalf("tick %d: %d timeouts %v, want %v", tick, len(got), got, want)
		}
		for _, r := range want {
			if !got[r] {
				t.Fatalf("tick %d: root %#x did not time out (got %v)", tick, r, got)
			}
		}
		if tick == 1 && s.limit != 2*lim {
			t.Fatalf("tick 1: the pass set limit %d, want %d", s.limit, 2*lim)
		}
		// The first pass (ticks 1 to lim/2) leaves a deadline at its new
		// limit far; the second (from tick lim, done by 2*lim-1) lists it once.
		if tick == lim-1 || tick == 2*lim-1 {
			if n, w := listings(s, next), int(tick/lim); n != w {
				t.Fatalf("tick %d (limit %d): root with deadline %d listed %d times on the due lists, want %d", tick, s.limit, 2*lim, n, w)
			}
		}
	}
	if s.Pending() != 0 {
		t.Fatalf("%d pending after every deadline", s.Pending())
	}
}

// TestLatePassHorizon: when Expire is first called exactly at the horizon
// (the pass starts a tick before it, or at it), the pass reads the whole
// table at the horizon tick rather than pacing itself, so every far root
// due at the horizon times out there, not later.
func TestLatePassHorizon(t *testing.T) {
	for _, first := range []uint64{minWindow - 1, minWindow} {
		s, clock := edgeShard(t)
		lim := s.limit
		const n = 500 // spread over the table's slots
		for r := uint64(1); r <= n; r++ {
			edgeInit(t, s, r*0x9e3779b97f4a7c15|1, uint32(lim))
		}
		total := 0
		for tick := first; tick <= lim+1; tick++ {
			got := len(expireAt(t, s, clock, tick))
			if tick != lim && got != 0 {
				t.Fatalf("first Expire at %d: %d timeouts at tick %d, want them all at %d", first, got, tick, lim)
			}
			if tick == lim && got != n {
				t.Fatalf("first Expire at %d: %d of %d roots due at the horizon %d timed out there", first, got, n, lim)
			}
			total += got
		}
		if total != n || s.Pending() != 0 {
			t.Fatalf("first Expire at %d: %d timeouts, %d pending", first, total, s.Pending())
		}
	}
}

// TestDueListSpan: a due list takes ticks in [cursor, cursor+buckets) and
// refuses the ticks just outside, so that no tick shares a bucket with
// another listed at the same time.
func TestDueListSpan(t *testing.T) {
	var d dueLists
	d.init(5, 10) // 8 buckets: ticks 10..17
	n := d.span
	if n != 8 {
		t.Fatalf("a span of %d ticks for 5, want 8", n)
	}
	if d.buckets != nil || d.bytes() != 0 {
		t.Fatalf("%d buckets (%d bytes) before the first root is listed, want none", len(d.buckets), d.bytes())
	}
	for _, tick := range []uint64{9, 10 + n} {
		if d.add(1, tick) {
			t.Fatalf("add at tick %d, outside [10, %d): accepted", tick, 10+n)
		}
	}
	for _, tick := range []uint64{10, 10 + n - 1} {
		if !d.add(tick, tick) {
			t.Fatalf("add at tick %d, inside [10, %d): refused", tick, 10+n)
		}
	}
	if uint64(len(d.buckets)) != n {
		t.Fatalf("%d buckets once roots are listed, want %d", len(d.buckets), n)
	}
	for _, tick := range []uint64{10, 10 + n - 1} {
		if r, ok := d.take(tick); !ok || r != tick {
			t.Fatalf("take(%d) = %d, %v; want %d, true", tick, r, ok, tick)
		}
		if r, ok := d.take(tick); ok {
			t.Fatalf("take(%d) again = %d; want nothing more there", tick, r)
		}
	}
}
