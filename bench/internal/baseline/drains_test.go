package baseline_test

import (
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/bench/internal/baseline"
	"github.com/xorack/xorack/internal/acktest"
	"github.com/xorack/xorack/internal/acktest/model"
)

// TestDrainsEmptied: the exact baselines against the model on fails after
// fan-out in a short shuffle window and large batches, where many drains
// are emptied by their trees' late ACKs before they expire (the standard
// drains cases mostly see them expire or give way): some must be, and at
// a bound a little under the working set some orphans must give way too
// where the baseline evicts.
func TestDrainsEmptied(t *testing.T) {
	forExact(t, func(t *testing.T, b impl) {
		for _, sc := range []acktest.Scenario{
			{Roots: 300, MaxPending: 4096, Window: 20, MaxBatch: 256, Dup: 0.01, Drains: true},
			{Roots: 300, MaxPending: 200, Window: 20, MaxBatch: 256, Drains: true},
		} {
			var st ackcore.Stats
			evicts := false
			for s := range 4 {
				sc.Seed = uint64(s + 1)
				var a ackcore.Interface
				newAcker := b.factory()
				acktest.Run(t, sc, func(c ackcore.Config) (ackcore.Interface, error) {
					x, err := newAcker(c)
					a = x
					return x, err
				})
				st.Add(a.Stats())
				_, evicts = a.(acktest.Evicter)
			}
			if st.OrphansDrained == 0 || evicts && sc.MaxPending < 4096 && st.OrphansEvicted == 0 {
				t.Errorf("%v: %d drains emptied, %d orphans evicted in 4 seeds", sc, st.OrphansDrained, st.OrphansEvicted)
			}
		}
	})
}

// step is one step of a directed run: msgs applied at once (ids: the edge
// ids each toggles, for the model; nil for none), or, with msgs nil, the
// clock moved by advance and Expire called.
type step struct {
	msgs    []ackcore.Msg
	ids     [][]uint64
	advance time.Duration
}

// runSteps applies steps to a fresh b with the given bound and to the
// model, and fails on the first difference in outcomes or counters; it
// returns the acker's final counters.
func runSteps(t *testing.T, b impl, maxPending int, steps []step) ackcore.Stats {
	t.Helper()
	const timeout, tick = acktest.Timeout, acktest.Tick
	clock := &ackcore.FakeClock{}
	clock.Set(time.Hour)
	a, err := b.factory()(ackcore.Config{MaxPending: maxPending, Timeout: timeout, Tick: tick, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	m := model.New(maxPending, timeout, tick)
	if ev, ok := a.(acktest.Evicter); ok {
		m.SetEviction(ev.FailBudget())
	}
	for i, s := range steps {
		var got, want []ackcore.Outcome
		if s.msgs == nil {
			clock.Add(s.advance)
			got, _ = a.Expire(make([]ackcore.Outcome, 0, 64))
			want = m.Expire(clock.Now())
		} else {
			got = a.Apply(s.msgs, nil)
			for j, msg := range s.msgs {
				if o, ok := m.Apply(clock.Now(), msg, s.ids[j]); ok {
					want = append(want, o)
				}
			}
		}
		model.Sort(got)
		model.Sort(want)
		if len(got) != len(want) {
			t.Fatalf("%s: step %d: outcomes %v, model %v", b.name, i, got, want)
		}
		for j := range got {
			g, w := got[j], want[j]
			if d := g.Latency - w.Latency; g.Root != w.Root || g.Kind != w.Kind || g.Reason != w.Reason || g.Task != w.Task || d < -tick || d > tick {
				t.Fatalf("%s: step %d: outcome %+v, model %+v", b.name, i, g, w)
			}
		}
		if g, w := a.Stats(), m.Stats(); g != w {
			t.Fatalf("%s: step %d: stats\n got  %+v\n want %+v", b.name, i, g, w)
		}
		if v, ok := a.(acktest.Verifier); ok {
			if err := v.Verify(); err != nil {
				t.Fatalf("%s: step %d: %v", b.name, i, err)
			}
		}
	}
	return a.Stats()
}

func msg(kind ackcore.Kind, root uint64, ids ...uint64) (ackcore.Msg, []uint64) {
	var val uint64
	for _, id := range ids {
		val ^= id
	}
	m := ackcore.Msg{Root: root, Kind: kind, Val: val}
	if kind == ackcore.Init {
		m.Task = 7
	}
	return m, ids
}

// one is a step of one message.
func one(kind ackcore.Kind, root uint64, ids ...uint64) step {
	m, i := msg(kind, root, ids...)
	return step{msgs: []ackcore.Msg{m}, ids: [][]uint64{i}}
}

func wait(d time.Duration) step { return step{advance: d} }

// Edge ids of the directed runs.
const (
	x, y, z, w = 0x11, 0x2200, 0x330000, 0x44000000
)

// TestDrainRules walks each exact baseline through the drain rule case by
// case, against the model: a FAIL carrying a val leaves a drain, which
// ACKs and further FAILs empty (Stats.OrphansDrained), which an INIT
// adopts like any orphan, which a RESET restarts and which expires as an
// orphan; a FAIL without a val, or with nothing left owed, removes the
// entry.
func TestDrainRules(t *testing.T) {
	Ack, Fail, Init, Reset := ackcore.Ack, ackcore.Fail, ackcore.Init, ackcore.Reset
	forExact(t, func(t *testing.T, b impl) {
		st := runSteps(t, b, 64, []step{
			// Root 1: INIT x^y, FAIL of y carrying y^z: drain x^z; ACK x,
			// then ACK z empties it.
			one(Init, 1, x, y), one(Fail, 1, y, z), one(Ack, 1, x), wait(time.Millisecond), one(Ack, 1, z),
			// Root 2: a FAIL empties a drain too, and does not fail it.
			one(Init, 2, x, y), one(Fail, 2, y, z), one(Fail, 2, x), one(Fail, 2, z),
			// Root 3: a FAIL without a val, or one owing nothing, removes.
			one(Init, 3, x, y), one(Fail, 3), one(Init, 4, x), one(Fail, 4, x),
			// Root 5: an INIT adopts a drain (a re-INIT of the root id).
			one(Init, 5, x, y), one(Fail, 5, y, z), one(Init, 5, w), one(Ack, 5, x, z, w),
			// Root 6: a drain made by a FAIL in the same batch as its
			// INIT and early ACK; expires as an orphan, after a RESET
			// restarts it.
			{msgs: []ackcore.Msg{{Root: 6, Kind: Ack, Val: x}, {Root: 6, Kind: Init, Task: 2, Val: x ^ y, TimeoutMs: 35}, {Root: 6, Kind: Fail, Val: y ^ z}},
				ids: [][]uint64{{x}, {x, y}, {y, z}}},
			wait(15 * time.Millisecond), one(Reset, 6), wait(15 * time.Millisecond), wait(10 * time.Millisecond),
			// Root 7: a custom timeout before the FAIL; the drain gets the
			// default one, from the FAIL.
			{msgs: []ackcore.Msg{{Root: 7, Kind: Init, Task: 1, Val: x ^ y, TimeoutMs: 60}}, ids: [][]uint64{{x, y}}},
			wait(10 * time.Millisecond), one(Fail, 7, y), wait(19 * time.Millisecond), wait(2 * time.Millisecond),
		})
		if st.OrphansDrained != 2 || st.Orphans != 2 || st.Pending != 0 {
			t.Errorf("%s: %+v, want 2 drained, 2 expired, none pending", b.name, st)
		}
	})
}

// TestDrainEviction: a drain gives way at the bound as the newest orphan,
// and an older orphan-queue place of its root (an early ACK queued it
// before its INIT) is stale: it neither evicts the drain nor keeps it
// from being evicted in its own turn.
func TestDrainEviction(t *testing.T) {
	Ack, Fail, Init := ackcore.Ack, ackcore.Fail, ackcore.Init
	forExact(t, func(t *testing.T, b impl) {
		if _, ok := mustMake(t, b, baseline.Config{MaxPending: 1, Clock: &ackcore.FakeClock{}}).(acktest.Evicter); !ok {
			return // no eviction (XsyncMap): refused at the bound instead
		}
		st := runSteps(t, b, 3, []step{
			one(Ack, 1, x),        // orphan 1, queued first
			one(Ack, 2, x),        // orphan 2
			one(Init, 1, x, y),    // root 1 adopted: its place is stale
			one(Fail, 1, y, z),    // drain 1, queued last
			one(Init, 3, x),       // full
			one(Init, 4, x),       // evicts orphan 2, not drain 1
			one(Ack, 1, z),        // empties drain 1
			one(Init, 5, w),       // room without evicting
			one(Init, 6, x, y),    // evicts nothing live without INIT: Failed{full}
			one(Fail, 5, w, x),    // drain 5
			one(Init, 7, y),       // evicts drain 5
			one(Ack, 5, x),        // a new orphan at the bound, none to evict: Refused{full}
			wait(acktest.Timeout), // everything expires
			wait(acktest.Timeout),
		})
		if st.OrphansDrained != 1 || st.OrphansEvicted != 2 || st.FailedFull != 1 || st.RefusedFull != 1 || st.Pending != 0 {
			t.Errorf("%s: %+v, want 1 drained, 2 evicted, 1 failed and 1 refused full, none pending", b.name, st)
		}
	})
}
