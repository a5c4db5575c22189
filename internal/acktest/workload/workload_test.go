package workload

import (
	"reflect"
	"testing"

	"github.com/xorack/xorack/ackcore"
)

// TestShapes checks each shape's messages per root (a chain's against its
// doc, d+1), that ByName finds every shape by its Name, and that it refuses
// names outside the ones it documents.
func TestShapes(t *testing.T) {
	want := map[string]int{"wordcount": 10, "tree8x8": 73, "chain4": 5, "diamond2": 8}
	for _, sh := range []Shape{WordCount, Tree8x8, Chain(4), Diamonds(2)} {
		if got := sh.Messages(); got != want[sh.Name] {
			t.Errorf("%s: %d messages per root, want %d", sh.Name, got, want[sh.Name])
		}
		if got, err := ByName(sh.Name); err != nil || !reflect.DeepEqual(got, sh) {
			t.Errorf("ByName(%q) = %+v, %v; want %+v", sh.Name, got, err, sh)
		}
	}
	for d := 1; d <= 16; d++ {
		if got := Chain(d).Messages(); got != d+1 {
			t.Errorf("chain%d: %d messages per root, want %d", d, got, d+1)
		}
	}
	for _, name := range []string{"tree9x9", "chain0", "diamond1001"} {
		if _, err := ByName(name); err == nil {
			t.Errorf("ByName accepted %q", name)
		}
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
