package workload

import (
	"testing"

	"github.com/xorack/xorack/ackcore"
)

func TestShapes(t *testing.T) {
	for _, c := range []struct {
		s Shape
		k int
	}{{WordCount, 10}, {Tree8x8, 73}, {Chain(4), 5}, {Diamonds(2), 8}} {
		if got := c.s.Messages(); got != c.k {
			t.Errorf("%s: %d messages per root, want %d", c.s.Name, got, c.k)
		}
	}
	if _, err := ByName("tree9x9"); err == nil {
		t.Error("ByName accepted an unknown shape")
	}
}

// TestStreamReplays applies the prefix and three cycles to a real shard:
// every tree completes each cycle, nothing fails, and the pending count
// never leaves [Pending - slack, Peak].
func TestStreamReplays(t *testing.T) {
	for _, sh := range []Shape{WordCount, Tree8x8, Chain(3), Diamonds(3)} {
		st := Build(sh, 2000, 7)
		clock := &ackcore.FakeClock{}
		s, err := ackcore.NewShard(ackcore.Config{MaxPending: st.MaxPending(), Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		out := s.Apply(st.Prefix, nil)
		for cycle := 0; cycle < 3; cycle++ {
			for i := 0; i < len(st.Cycle); i += 97 {
				out = s.Apply(st.Cycle[i:min(i+97, len(st.Cycle))], out[:0])
				for _, o := range out {
					if o.Kind != ackcore.Completed {
						t.Fatalf("%s: outcome %+v", sh.Name, o)
					}
				}
				if p := s.Pending(); p > st.Peak || p < st.Pending*9/10 {
					t.Fatalf("%s: %d pending, stream says %d (peak %d)", sh.Name, p, st.Pending, st.Peak)
				}
			}
		}
		stats := s.Stats()
		if want := uint64(3 * st.Slots); stats.Completed < want || stats.Completed > want+uint64(st.Slots) {
			t.Fatalf("%s: %d completed over 3 cycles of %d slots", sh.Name, stats.Completed, st.Slots)
		}
		if stats.Failed() != 0 || stats.RefusedFull != 0 {
			t.Fatalf("%s: stats %+v", sh.Name, stats)
		}
	}
}
