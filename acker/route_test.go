package acker

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/xorack/xorack/internal/roothash"
	"github.com/xorack/xorack/internal/splitmix"
	"github.com/xorack/xorack/internal/testkit"
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
	d1, d2, agree := newRouter(0, 8), newRouter(0, 8), 0
	for i := range uint64(10_000) {
		if d1.shard(i+1) == d2.shard(i+1) {
			agree++
		}
	}
	if agree > 2000 {
		t.Fatalf("two drawn seeds: %d of 10000 roots routed alike (chance: 1250)", agree)
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

// TestRouteBalanceSweep: sequential, shifted, Snowflake-style and
// partition|offset ids over 2 to 64 shards under hundreds of seeds: for
// every seed the fullest shard holds at most 1.2x the mean. 2,048 roots a
// shard make chance alone reach about 1.1x at 64 shards (the mean plus
// four standard deviations), so a seed over 1.2x is structure the hash
// let through.
func TestRouteBalanceSweep(t *testing.T) {
	testkit.SkipUnderRace(t, "a router's hashes on one goroutine: nothing for the race detector to watch")
	seeds := testkit.Size(300, 60)
	var counts [64]int
	for _, shards := range []int{2, 3, 5, 8, 16, 32, 64} {
		roots := uint64(2048 * shards)
		for _, p := range rootPatterns[1:] { // the structured ones
			worst, worstSeed := 0.0, uint64(0)
			for seed := range uint64(seeds) {
				r := newRouter(seed+1, shards)
				n := counts[:shards]
				clear(n)
				for i := range roots {
					n[r.shard(p.id(i))]++
				}
				if ratio := float64(slices.Max(n)) / float64(roots/uint64(shards)); ratio > worst {
					worst, worstSeed = ratio, seed+1
				}
			}
			if worst > 1.2 {
				t.Errorf("%d shards, %s ids: seed %d puts %.3fx the mean on the fullest shard", shards, p.name, worstSeed, worst)
			}
			t.Logf("%d shards, %s ids: worst of %d seeds %.3fx the mean", shards, p.name, seeds, worst)
		}
	}
}

// TestRouteApartFromTables: a router and a shard given the same seed hash
// independently: the roots routed to one shard spread over the whole of a
// table's hash range, not the part the shard's own high bits select.
func TestRouteApartFromTables(t *testing.T) {
	const seed, shards, buckets = 42, 8, 16
	r := newRouter(seed, shards)
	table := roothash.New(seed) // shard 0's table keys under Shard.Seed = seed
	var n [buckets]int
	total := 0
	for i := range uint64(200_000) {
		if r.shard(i+1) == 0 {
			n[table.Range(i+1, buckets)]++
			total++
		}
	}
	for b, c := range n {
		if ratio := float64(c) / float64(total/buckets); ratio < 0.8 || ratio > 1.2 {
			t.Fatalf("bucket %d of shard 0's table range holds %.2fx the mean (%v)", b, ratio, n)
		}
	}
}

// BenchmarkRoute: the router's cost per root (a producer's stage calls it
// once per message), over the id patterns, 8 shards.
func BenchmarkRoute(b *testing.B) {
	for _, p := range rootPatterns[1:] {
		b.Run("ids="+p.name, func(b *testing.B) {
			r := newRouter(1, 8)
			ids := make([]uint64, 4096)
			for i := range ids {
				ids[i] = p.id(uint64(i))
			}
			var sum uint64
			for i := 0; b.Loop(); i++ {
				sum += r.shard(ids[i&4095])
			}
			if sum > uint64(b.N)*8 {
				b.Fatal("shard out of range")
			}
		})
	}
}

// TestShardSeedsNeverZero: a fixed Shard.Seed fixes every shard's keys,
// even the shard whose seed + i*Golden wraps to 0 (which would draw
// random keys), and the shards' seeds stay distinct.
func TestShardSeedsNeverZero(t *testing.T) {
	g := uint64(splitmix.Golden)
	for _, seed := range []uint64{1, 42, -g, -(5 * g), -(63 * g), 1 << 63} {
		seen := map[uint64]int{}
		for i := range 64 {
			s := shardSeed(seed, i)
			if s == 0 {
				t.Fatalf("seed %#x: shard %d gets seed 0 (random keys)", seed, i)
			}
			if j, ok := seen[s]; ok {
				t.Fatalf("seed %#x: shards %d and %d both get seed %#x", seed, j, i, s)
			}
			seen[s] = i
		}
	}
	if s := shardSeed(0, 3); s != 0 {
		t.Fatalf("seed 0 (random keys) gives shard 3 seed %#x", s)
	}
}
