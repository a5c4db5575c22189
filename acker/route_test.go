package acker

import (
	"math/rand/v2"
	"testing"
)

// rootPatterns are the id shapes engines use: random, sequential, shifted
// counters, Snowflake-style timestamps (ms<<22 | sequence, 1000 per ms),
// and source offsets with a partition in the low bits (8 partitions).
var rootPatterns = []struct {
	name string
	id   func(i uint64) uint64
}{
	{"random", func(uint64) uint64 { return rand.Uint64() | 1 }},
	{"sequential", func(i uint64) uint64 { return i + 1 }},
	{"shifted", func(i uint64) uint64 { return (i + 1) << 16 }},
	{"snowflake", func(i uint64) uint64 { return (1_700_000_000_000+i/1000)<<22 | i%1000 }},
	{"partitioned", func(i uint64) uint64 { return (i/8+1)<<16 | i%8 }},
}

// TestRouteBalance: 1,000,000 roots of each pattern over 8 shards; the
// fullest shard holds at most 1.2x the mean, for a seed drawn from
// crypto/rand and for fixed ones.
func TestRouteBalance(t *testing.T) {
	const roots, shards = 1_000_000, 8
	for _, seed := range []uint64{0, 1, 0xdeadbeef} {
		r := newRouter(seed, shards)
		for _, p := range rootPatterns {
			var n [shards]int
			for i := range uint64(roots) {
				n[r.shard(p.id(i))]++
			}
			fullest := 0
			for _, c := range n {
				fullest = max(fullest, c)
			}
			if ratio := float64(fullest) / (roots / shards); ratio > 1.2 {
				t.Errorf("seed %#x, %s ids: fullest shard %.3fx the mean (%v)", seed, p.name, ratio, n)
			}
		}
	}
}

// TestRouteKeyed: the mapping is a function of the seed: the same seed
// routes the same way, another seed otherwise, and a drawn seed is not 0's
// fixed mapping.
func TestRouteKeyed(t *testing.T) {
	a, b, c := newRouter(42, 8), newRouter(42, 8), newRouter(43, 8)
	same, diff := 0, 0
	for i := range uint64(10_000) {
		if a.shard(i+1) == b.shard(i+1) {
			same++
		}
		if a.shard(i+1) == c.shard(i+1) {
			diff++
		}
	}
	if same != 10_000 || diff > 2000 {
		t.Fatalf("seed 42 twice: %d of 10000 agree; seeds 42 and 43: %d agree (chance: 1250)", same, diff)
	}
	if d1, d2 := newRouter(0, 8), newRouter(0, 8); d1.k1 == d2.k1 && d1.k2 == d2.k2 {
		t.Fatal("two drawn seeds gave the same keys")
	}
	for _, n := range []int{1, 3, 1024} {
		r := newRouter(0, n)
		for i := range uint64(1000) {
			if s := r.shard(i << 16); s >= uint64(n) {
				t.Fatalf("%d shards: root %#x to shard %d", n, i<<16, s)
			}
		}
	}
}
