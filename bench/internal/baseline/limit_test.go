package baseline_test

import (
	"math/rand/v2"
	"testing"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/bench/internal/baseline"
	"github.com/xorack/xorack/internal/acktest/treegen"
)

type limitModel struct {
	val  uint64
	task uint32
}

// runLimit applies random messages over a few roots to a small Limit (so
// that probes wrap around and deletions shift chains back) and to a plain
// map doing the same insert / XOR / delete-on-zero, and compares outcomes
// and contents after every batch.
func runLimit(t testing.TB, seed uint64, maxPending, nroots, steps int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	l, err := baseline.NewLimit(baseline.Config{MaxPending: maxPending})
	if err != nil {
		t.Fatal(err)
	}
	roots := make([]uint64, nroots)
	for i := range roots {
		roots[i] = rng.Uint64() | 1
	}
	vals := []uint64{1, 2, 3} // few values, so that vals often return to 0
	m := map[uint64]limitModel{}
	var out []ackcore.Outcome
	var completed uint64
	for step := range steps {
		batch := make([]ackcore.Msg, 1+rng.IntN(8))
		var want []ackcore.Outcome
		for i := range batch {
			msg := ackcore.Msg{Root: roots[rng.IntN(nroots)], Kind: ackcore.Kind(1 + rng.IntN(4))}
			if msg.Kind == ackcore.Init || msg.Kind == ackcore.Ack {
				msg.Val = vals[rng.IntN(len(vals))] * uint64(rng.IntN(2))
			}
			if msg.Kind == ackcore.Init {
				msg.Task = rng.Uint32N(4)
			}
			batch[i] = msg
			e, ok := m[msg.Root]
			switch {
			case ok:
				e.val ^= msg.Val
				if msg.Kind == ackcore.Init {
					e.task = msg.Task
				}
				if e.val == 0 {
					delete(m, msg.Root)
					want = append(want, ackcore.Outcome{Root: msg.Root, Task: e.task, Kind: ackcore.Completed})
					completed++
				} else {
					m[msg.Root] = e
				}
			case msg.Val == 0:
				if msg.Kind == ackcore.Init {
					want = append(want, ackcore.Outcome{Root: msg.Root, Task: msg.Task, Kind: ackcore.Completed})
					completed++
				}
			case len(m) >= maxPending:
				want = append(want, ackcore.Outcome{Root: msg.Root, Task: ackcore.NoTask, Kind: ackcore.Refused, Reason: ackcore.ReasonFull})
			default:
				task := ackcore.NoTask
				if msg.Kind == ackcore.Init {
					task = msg.Task
				}
				m[msg.Root] = limitModel{val: msg.Val, task: task}
			}
		}
		out = l.Apply(batch, out[:0])
		if len(out) != len(want) {
			t.Fatalf("step %d: outcomes %v, want %v", step, out, want)
		}
		for i := range out {
			if out[i] != want[i] {
				t.Fatalf("step %d: outcome %d = %+v, want %+v", step, i, out[i], want[i])
			}
		}
		if err := l.Verify(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if st := l.Stats(); st.Pending != len(m) || st.Completed != completed {
			t.Fatalf("step %d: stats %+v, want %d pending, %d completed", step, st, len(m), completed)
		}
	}
}

func TestLimitMatchesMap(t *testing.T) {
	steps := 20000
	if testing.Short() {
		steps = 3000
	}
	for _, c := range []struct{ maxPending, roots int }{{1, 3}, {4, 6}, {8, 40}, {64, 100}} {
		runLimit(t, uint64(c.maxPending), c.maxPending, c.roots, steps)
	}
}

func FuzzLimit(f *testing.F) {
	f.Add(uint64(1), uint8(8), uint8(40))
	f.Fuzz(func(t *testing.T, seed uint64, bound, roots uint8) {
		runLimit(t, seed, 1+int(bound), 1+int(roots), 200)
	})
}

// TestLimitTreegen: over generated clean streams in any order, every root
// completes exactly once with its task, and the table ends empty.
func TestLimitTreegen(t *testing.T) {
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 3))
		evs, roots := treegen.Generate(rng, treegen.Options{Roots: 500, MaxFanout: 3, MaxDepth: 3, JoinProb: 0.2, Tasks: 5})
		evs, _ = treegen.Faults(rng, evs, len(evs), 0, 0) // any order
		l, err := baseline.NewLimit(baseline.Config{MaxPending: 1 << 12})
		if err != nil {
			t.Fatal(err)
		}
		tasks := map[uint64]uint32{}
		msgs := make([]ackcore.Msg, len(evs))
		for i, e := range evs {
			msgs[i] = e.Msg
			if e.Msg.Kind == ackcore.Init {
				tasks[e.Msg.Root] = e.Msg.Task
			}
		}
		var out []ackcore.Outcome
		seen := map[uint64]int{}
		for len(msgs) > 0 {
			n := min(1+rng.IntN(64), len(msgs))
			out = l.Apply(msgs[:n], out[:0])
			msgs = msgs[n:]
			for _, o := range out {
				if o.Kind != ackcore.Completed || o.Task != tasks[o.Root] {
					t.Fatalf("seed %d: %+v, want completed with task %d", seed, o, tasks[o.Root])
				}
				seen[o.Root]++
			}
		}
		for _, r := range roots {
			if seen[r] != 1 {
				t.Fatalf("seed %d: root %#x completed %d times", seed, r, seen[r])
			}
		}
		if st := l.Stats(); st.Pending != 0 || st.Completed != uint64(len(roots)) {
			t.Fatalf("seed %d: stats %+v", seed, st)
		}
		if err := l.Verify(); err != nil {
			t.Fatal(err)
		}
	}
}
