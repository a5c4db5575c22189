package acker_test

import (
	"sync"
	"testing"

	"github.com/xorack/xorack/acker"
)

// TestEdgeID: ids are never 0 and do not repeat, from many goroutines at
// once (the race detector checks the concurrency), and cost no
// allocation.
func TestEdgeID(t *testing.T) {
	const goroutines, each = 8, 20_000
	ids := make([][]uint64, goroutines)
	var wg sync.WaitGroup
	for g := range ids {
		wg.Go(func() {
			for range each {
				ids[g] = append(ids[g], acker.EdgeID())
			}
		})
	}
	wg.Wait()
	seen := make(map[uint64]bool, goroutines*each)
	for _, s := range ids {
		for _, id := range s {
			if id == 0 || seen[id] {
				t.Fatalf("id %#x: zero or repeated among %d", id, len(seen))
			}
			seen[id] = true
		}
	}
	if a := testing.AllocsPerRun(1000, func() { _ = acker.EdgeID() }); a != 0 {
		t.Fatalf("EdgeID allocates %.1f", a)
	}
}

func BenchmarkEdgeID(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var x uint64
		for pb.Next() {
			x ^= acker.EdgeID()
		}
		if x == 1 {
			b.Log(x)
		}
	})
}
