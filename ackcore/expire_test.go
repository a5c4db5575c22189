package ackcore_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/acktest"
	"github.com/xorack/xorack/internal/invariants"
	"github.com/xorack/xorack/internal/splitmix"
	"github.com/xorack/xorack/internal/testkit"
)

// waveSize is the number of roots the expiry tests time out together:
// enough that a whole-table step would break every limit.
func waveSize() int {
	if invariants.Enabled || testing.Short() {
		return 20_000
	}
	return 200_000
}

// initWave applies an INIT for roots 1..n (random-looking ids), with
// timeoutMs each (0: the default), in batches.
func initWave(t testing.TB, s *ackcore.Shard, n int, timeoutMs uint32) {
	t.Helper()
	msgs := make([]ackcore.Msg, 0, 256)
	for r := 1; r <= n; r++ {
		msgs = append(msgs, ackcore.Msg{Root: splitmix.Nth(uint64(r)) | 1, Kind: ackcore.Init, Task: uint32(r % 7), Val: 1, TimeoutMs: timeoutMs})
		if len(msgs) == cap(msgs) || r == n {
			if out := s.Apply(msgs, nil); len(out) != 0 {
				t.Fatalf("INIT wave: %v", out[0])
			}
			msgs = msgs[:0]
		}
	}
}

// drain calls Expire with room for room outcomes until it says no more,
// checking every call's slice of work against the documented limits, and
// returns the timeouts reported and the calls made.
func drain(t *testing.T, s *ackcore.Shard, room int) (timeouts, calls int) {
	t.Helper()
	out := make([]ackcore.Outcome, 0, room)
	for more := true; more; {
		out, more = s.Expire(out[:0])
		calls++
		w := s.LastExpire()
		if w.Slots > ackcore.ExpireScanLimit || w.Entries > ackcore.ExpireEntryLimit || len(out) > room || w.Outcomes != len(out) {
			t.Fatalf("Expire call %d: %+v with %d outcomes in room for %d; limits: %d slots, %d entries", calls, w, len(out), room, ackcore.ExpireScanLimit, ackcore.ExpireEntryLimit)
		}
		for _, o := range out {
			if o.Kind != ackcore.Failed || o.Reason != ackcore.ReasonTimeout {
				t.Fatalf("Expire reported %+v", o)
			}
		}
		timeouts += len(out)
		if calls > 1_000_000 {
			t.Fatal("Expire keeps saying more")
		}
	}
	return timeouts, calls
}

// TestExpireSlices times out a wave of roots together, after a pause of an
// hour and with Expire called every tick, at several rooms: no Expire call
// reads more than ExpireScanLimit slots, looks up more than
// ExpireEntryLimit entries, or writes more outcomes than its room, and
// every root is reported once, at its deadline when Expire runs every tick.
// A new shard holds no near tier; after the wave it is back to its idle
// size.
func TestExpireSlices(t *testing.T) {
	testkit.SkipUnderRace(t, "a shard on one goroutine: nothing for the race detector to watch")
	n := waveSize()
	for _, room := range []int{1, 7, 1024} {
		for _, mode := range []string{"pause", "every-tick"} {
			t.Run(fmt.Sprintf("%s/room=%d", mode, room), func(t *testing.T) {
				if room == 1 && n > 20_000 {
					t.Skip("room 1 at this size takes long; smaller waves cover it")
				}
				clock := &ackcore.FakeClock{}
				s := mustShard(t, ackcore.Config{MaxPending: n, Clock: clock, Seed: 9})
				if b := s.NearBytes(); b != 0 {
					t.Fatalf("a new shard's near tier holds %d bytes, want 0", b)
				}
				initWave(t, s, n, 0)
				got := 0
				switch mode {
				case "pause":
					clock.Add(time.Hour)
					got, _ = drain(t, s, room)
				case "every-tick":
					for tick := time.Duration(1); tick <= 30_000; tick++ {
						clock.Add(time.Millisecond)
						k, _ := drain(t, s, room)
						if k > 0 && tick != 30_000 {
							t.Fatalf("%d roots timed out at %v, before their deadline", k, tick*time.Millisecond)
						}
						got += k
					}
				}
				if got != n || s.Pending() != 0 {
					t.Fatalf("%d timeouts for %d roots, %d pending", got, n, s.Pending())
				}
				if b, idle := s.NearBytes(), s.NearIdleBytes(); b != idle {
					t.Fatalf("near tier holds %d bytes after the wave, %d idle", b, idle)
				}
				mustVerify(t, s)
			})
		}
	}
}

// TestExpireNoRoom: Expire with no room at all does nothing and says no
// more, so `for more` ends; the roots time out at the next call with room.
func TestExpireNoRoom(t *testing.T) {
	s, clock := newShard(t, 100)
	initWave(t, s, 10, 0)
	clock.Add(time.Minute)
	calls := 0
	for out, more := []ackcore.Outcome(nil), true; more; calls++ {
		if calls == 100 {
			t.Fatal("Expire with no room keeps saying more")
		}
		out, more = s.Expire(out[:0])
		if len(out) != 0 {
			t.Fatalf("Expire wrote %d outcomes into no room", len(out))
		}
	}
	if got := s.ExpireAll(nil); len(got) != 10 {
		t.Fatalf("%d timeouts after the calls with no room, want 10", len(got))
	}
}

// TestClockJump: a clock that jumps 25 to 30 days (a suspended machine)
// times out every root pending at the jump, and roots made after it still
// time out exactly at their deadline, never early.
func TestClockJump(t *testing.T) {
	for _, days := range []time.Duration{25, 27, 30} {
		s, clock := newShard(t, 1000)
		initWave(t, s, 100, 0)
		clock.Add(days * 24 * time.Hour)
		if got := s.ExpireAll(nil); len(got) != 100 || s.Pending() != 0 {
			t.Fatalf("jump of %d days: %d timeouts for 100 roots, %d pending", days, len(got), s.Pending())
		}
		none(t, s.Apply([]ackcore.Msg{acktest.InitMsg(7, 1, 1)}, nil))
		clock.Add(30*time.Second - time.Millisecond)
		none(t, s.ExpireAll(nil))
		clock.Add(time.Millisecond)
		if o := one(t, s.ExpireAll(nil)); o.Root != 7 || o.Reason != ackcore.ReasonTimeout {
			t.Fatalf("after the jump: %+v", o)
		} else if d := o.Latency - 30*time.Second; d < -time.Millisecond || d > time.Millisecond {
			t.Fatalf("after the jump: latency %v, want 30s", o.Latency)
		}
		mustVerify(t, s)
	}
}

// TestNearWheelShrinks: a new shard holds no near tier; a burst of roots
// with short timeouts (near timers from the start) makes the near wheel
// and grows it; once they are gone it is back to its idle size. Under -short (CI's race and invariants steps, where each
// of the burst's INITs checks the whole table) 1,000 roots in a table for
// 2,000: still four doublings past the wheel's idle 64.
func TestNearWheelShrinks(t *testing.T) {
	burst := testkit.Size(5000, 1000)
	s, clock := newShard(t, 2*burst)
	if b := s.NearBytes(); b != 0 {
		t.Fatalf("a new shard's near tier holds %d bytes, want 0", b)
	}
	initWave(t, s, burst, 5) // 5 ms: near from the start
	idle := s.NearIdleBytes()
	if idle == 0 || s.NearBytes() <= idle {
		t.Fatalf("near tier %d bytes with %d near timers, %d idle", s.NearBytes(), burst, idle)
	}
	clock.Add(10 * time.Millisecond)
	if got := len(s.ExpireAll(nil)); got != burst {
		t.Fatalf("%d timeouts, want %d", got, burst)
	}
	if b := s.NearBytes(); b != idle {
		t.Fatalf("near tier holds %d bytes after the burst, %d idle", b, idle)
	}
}

// TestPerRootTimingInSlot: roots with their own timeouts (uniform 1-60 s),
// and roots that get a RESET each, keep their timing in the slot (no side
// map) at under 40 bytes per root, time out at their own deadlines, and
// report latencies from their INIT. A timeout equal to the default is the
// default: no extra memory at all.
func TestPerRootTimingInSlot(t *testing.T) {
	n := uint64(20_000)
	if invariants.Enabled {
		n = 2000 // every slow-path message checks the whole table
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, mode := range []string{"per-root", "reset", "default-ms"} {
		t.Run(mode, func(t *testing.T) {
			s, clock := newShard(t, int(n))
			base := s.TableBytes()
			timeouts := map[uint64]time.Duration{}
			var msgs []ackcore.Msg
			for r := uint64(1); r <= n; r++ {
				m := acktest.InitMsg(r<<16, 1, r)
				switch mode {
				case "per-root":
					m.TimeoutMs = 1000 + rng.Uint32N(59_001)
					timeouts[m.Root] = time.Duration(m.TimeoutMs) * time.Millisecond
				case "default-ms":
					m.TimeoutMs = 30_000
				}
				msgs = append(msgs, m)
			}
			none(t, s.Apply(msgs, nil))
			if mode == "reset" {
				clock.Add(7 * time.Second)
				msgs = msgs[:0]
				for r := uint64(1); r <= n; r++ {
					msgs = append(msgs, acktest.ResetMsg(r<<16))
					timeouts[r<<16] = 37 * time.Second // from the INIT
				}
				none(t, s.Apply(msgs, nil))
			}
			if k := s.SideLen(); k != 0 {
				t.Fatalf("%d roots in the side map", k)
			}
			// 33.4 bytes a root for the table, 3 for the ext array; the
			// small tables of -tags invariants fill at most 7/10 of their
			// slots (35.8 bytes a root at the bound, over 40 with the ext
			// array at 2,000 roots), so the extra is checked alone there.
			if perRoot := float64(s.TableBytes()) / float64(n); perRoot > 40 && !invariants.Enabled {
				t.Fatalf("%.1f bytes per pending root", perRoot)
			}
			if extra := float64(s.TableBytes()-base) / float64(n); extra > 4 {
				t.Fatalf("%.1f bytes per root over the default timing", extra)
			}
			if mode == "default-ms" && s.TableBytes() != base {
				t.Fatalf("TimeoutMs equal to the default: %d bytes, %d without", s.TableBytes(), base)
			}
			// Every root times out at its deadline with its latency since
			// the INIT; step the clock a second at a time.
			seen := 0
			now := time.Duration(0) // since the INITs
			if mode == "reset" {
				now = 7 * time.Second
			}
			for seen < int(n) && now < 2*time.Minute {
				clock.Add(time.Second)
				now += time.Second
				for _, o := range s.ExpireAll(nil) {
					want, ok := timeouts[o.Root]
					if mode == "default-ms" {
						want, ok = 30*time.Second, true
					}
					if !ok || o.Reason != ackcore.ReasonTimeout || want > now || want <= now-time.Second {
						t.Fatalf("at %v: %+v, its timeout %v", now, o, want)
					}
					if d := o.Latency - now; d < -time.Millisecond || d > time.Millisecond {
						t.Fatalf("root %#x latency %v at %v since its INIT", o.Root, o.Latency, now)
					}
					seen++
				}
			}
			if seen != int(n) {
				t.Fatalf("%d of %d roots timed out", seen, n)
			}
			mustVerify(t, s)
		})
	}
}

// TestOldestPendingNoInit: an entry without INIT ages from when it was
// made, not from its last RESET.
func TestOldestPendingNoInit(t *testing.T) {
	s, clock := newShard(t, 100)
	none(t, s.Apply([]ackcore.Msg{acktest.AckMsg(99, 1)}, nil))
	clock.Add(5 * time.Second)
	none(t, s.Apply([]ackcore.Msg{acktest.ResetMsg(99)}, nil))
	clock.Add(time.Second)
	got := s.OldestPending(1, nil)
	if len(got) != 1 || got[0].Root != 99 || got[0].Task != ackcore.NoTask {
		t.Fatalf("%+v", got)
	}
	if d := got[0].Age - 6*time.Second; d < -time.Millisecond || d > time.Millisecond {
		t.Fatalf("age %v, want 6s (since the ACK that made it)", got[0].Age)
	}
	if d := got[0].Deadline - 29*time.Second; d < -time.Millisecond || d > time.Millisecond {
		t.Fatalf("deadline in %v, want 29s (30s from the RESET)", got[0].Deadline)
	}
}

// TestFailAtBound: a FAIL at the bound. With MaxPending 1 and root 1 pending,
// a FAIL for root 2 must not be lost: once root 1 is done, root 2's INIT
// and ACK must end in Failed{explicit}, never Completed. Past the reserve,
// FAILs are held in the filter and still win.
func TestFailAtBound(t *testing.T) {
	s, clock := newShard(t, 1)
	none(t, s.Apply([]ackcore.Msg{acktest.InitMsg(1, 1, 5)}, nil))
	none(t, s.Apply([]ackcore.Msg{acktest.FailMsg(2)}, nil))
	if st := s.Stats(); st.FailsReserved != 1 || st.RefusedFull != 0 {
		t.Fatalf("FAIL at the bound: %+v", st)
	}
	if o := one(t, s.Apply([]ackcore.Msg{acktest.AckMsg(1, 5)}, nil)); o.Root != 1 || o.Kind != ackcore.Completed {
		t.Fatalf("root 1: %+v", o)
	}
	out := s.Apply([]ackcore.Msg{acktest.InitMsg(2, 3, 9), acktest.AckMsg(2, 9)}, nil)
	if len(out) != 1 || out[0].Root != 2 || out[0].Kind != ackcore.Failed || out[0].Reason != ackcore.ReasonExplicit || out[0].Task != 3 {
		t.Fatalf("root 2 after its FAIL: %v", out)
	}
	clock.Add(31 * time.Second) // the stale ACK's orphan goes
	s.ExpireAll(nil)
	none(t, s.Apply([]ackcore.Msg{acktest.InitMsg(1, 1, 5)}, nil)) // root 1 again: the table at its bound
	// Fill the reserve, then overflow it: the overflowing FAILs are
	// held in the filter and still fail their roots.
	var fails []ackcore.Msg
	r0 := uint64(1000)
	for r := r0; r < r0+uint64(s.FailReserve())+50; r++ {
		fails = append(fails, acktest.FailMsg(r))
	}
	none(t, s.Apply(fails, nil))
	st := s.Stats()
	if st.FailsFiltered == 0 || st.Pending != 1+s.FailReserve() {
		t.Fatalf("FAILs over the reserve: %+v", st)
	}
	for _, f := range fails {
		o := one(t, s.Apply([]ackcore.Msg{acktest.InitMsg(f.Root, 4, 1)}, nil))
		if o.Kind != ackcore.Failed || o.Reason != ackcore.ReasonExplicit {
			t.Fatalf("INIT of root %d after its FAIL: %+v", f.Root, o)
		}
	}
	// The filter forgets after two timeouts at most; so do the
	// reserve's orphans.
	clock.Add(61 * time.Second)
	s.ExpireAll(nil)
	none(t, s.Apply([]ackcore.Msg{acktest.AckMsg(1, 5)}, nil)) // root 1 timed out: a new entry, no INIT
	clock.Add(31 * time.Second)
	s.ExpireAll(nil)
	none(t, s.Apply([]ackcore.Msg{acktest.InitMsg(r0+uint64(s.FailReserve())+1, 4, 1)}, nil))
	mustVerify(t, s)
}

// TestMemoryBudget: a bound whose memory exceeds the budget is refused
// with the bytes named, before anything is allocated (MaxPendingLimit
// would need over 100 GB).
func TestMemoryBudget(t *testing.T) {
	for _, c := range []ackcore.Config{
		{MaxPending: ackcore.MaxPendingLimit},
		{MaxPending: 1 << 20, MaxBytes: 1 << 20},
	} {
		_, err := ackcore.NewShard(c)
		if err == nil || !strings.Contains(err.Error(), "bytes") || !strings.Contains(err.Error(), "MaxBytes") {
			t.Fatalf("NewShard(%+v) = %v, want an error stating the bytes against MaxBytes", c, err)
		}
		if b := c.Bytes(); !strings.Contains(err.Error(), fmt.Sprint(b)) {
			t.Fatalf("error %q does not state the %d bytes", err, b)
		}
	}
	c := ackcore.Config{MaxPending: 1 << 20}
	if err := c.Validate(); err != nil {
		t.Fatalf("a million pending roots under the default budget: %v", err)
	}
	if err := (&ackcore.Config{MaxPending: 1, MaxBytes: -1}).Validate(); err == nil {
		t.Fatal("negative MaxBytes accepted")
	}
}

// TestStatsCountRefused pins what Stats' doc says: a well-formed message
// refused at the bound is counted under its kind and under its refusal; a
// malformed one only under RefusedInvalid.
func TestStatsCountRefused(t *testing.T) {
	s, _ := newShard(t, 1)
	s.Apply([]ackcore.Msg{acktest.InitMsg(1, 1, 1), acktest.InitMsg(2, 1, 1), acktest.AckMsg(3, 1), acktest.ResetMsg(4), {Root: 0, Kind: ackcore.Ack}}, nil)
	st := s.Stats()
	if st.Inits != 2 || st.FailedFull != 1 || st.Acks != 1 || st.Resets != 1 || st.RefusedFull != 2 || st.RefusedInvalid != 1 {
		t.Fatalf("%+v", st)
	}
}

// TestTableBytesReal: TableBytes follows what the shard really holds, as
// the heap sees it, on the common paths and with every root in the side
// map (timeouts longer than the slot holds).
func TestTableBytesReal(t *testing.T) {
	testkit.SkipUnderInvariants(t, "the invariant checks allocate")
	const n = 100_000
	for _, timeoutMs := range []uint32{0, 45_000, 10 * 60_000} {
		before := heapInUse()
		s, _ := newShard(t, n)
		initWave(t, s, n, timeoutMs)
		held := heapInUse() - before
		if r := float64(s.TableBytes()) / float64(held); r < 0.9 || r > 1.1 {
			t.Errorf("TimeoutMs %d: TableBytes %d, heap %d (%.2fx)", timeoutMs, s.TableBytes(), held, r)
		}
		t.Logf("TimeoutMs %d: TableBytes %d (%.1f B/root), heap %d, side map %d roots", timeoutMs, s.TableBytes(), float64(s.TableBytes())/n, held, s.SideLen())
		runtime.KeepAlive(s)
	}
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// TestFailFilterLater: the overflow filter holds a FAIL for at least one
// timeout also when it was last used long ago.
func TestFailFilterLater(t *testing.T) {
	s, clock := newShard(t, 1)
	none(t, s.Apply([]ackcore.Msg{acktest.InitMsg(1, 1, 5)}, nil))
	var fails []ackcore.Msg
	for r := uint64(100); r < 100+uint64(s.FailReserve())+1; r++ {
		fails = append(fails, acktest.FailMsg(r))
	}
	clock.Add(10 * time.Minute) // the filter's generation was set at creation
	none(t, s.Apply(fails, nil))
	if st := s.Stats(); st.FailsFiltered != 1 {
		t.Fatalf("%+v", st)
	}
	last := fails[len(fails)-1].Root
	clock.Add(29 * time.Second)
	if o := one(t, s.Apply([]ackcore.Msg{acktest.AckMsg(1, 5)}, nil)); o.Kind != ackcore.Completed { // room for the INIT below
		t.Fatalf("root 1: %+v", o)
	}
	if o := one(t, s.Apply([]ackcore.Msg{acktest.InitMsg(last, 2, 1)}, nil)); o.Kind != ackcore.Failed || o.Reason != ackcore.ReasonExplicit {
		t.Fatalf("INIT of a root whose FAIL the filter holds, 29s later: %+v", o)
	}
}
