package acker

import (
	"github.com/xorack/xorack/internal/roothash"
	"github.com/xorack/xorack/internal/splitmix"
)

// router maps a root to the shard that owns it (docs/semantics.md, rule 9:
// every message of a root goes to one shard). It is immutable after New
// and shared by every producer.
//
// The hash is the shard table's own keyed hash (internal/roothash: a folded
// 128-bit multiply and a multiply), under keys of its own, and the shard
// is its fast range over n (the high word of hash × n). The same function
// places a root in the shards and in a shard's table, so structured ids
// (counters, i<<16, timestamps in the high bits, a partition in the low
// bits) that scatter over a table's slots scatter over the shards too
// (TestRouteBalanceSweep), and without the keys no one can pick ids that
// pile onto one shard. The router's keys are independent of the shards':
// with the same keys, the roots of one shard would fall into one part of
// its table (both take the hash's high bits).
type router struct {
	h roothash.Hash
	n uint64 // shards
}

// routeSalt separates the router's keys from a shard's: a shard seeded
// with Config.Shard.Seed = s and a router with Config.Seed = s get
// different keys.
const routeSalt = 0x726f757465 // "route"

func newRouter(seed uint64, shards int) router {
	if seed != 0 {
		if seed = splitmix.Mix64(seed ^ routeSalt); seed == 0 {
			seed = 1 // 0 would draw keys from crypto/rand
		}
	}
	return router{h: roothash.New(seed), n: uint64(shards)}
}

// shardSeed is the Shard.Seed shard i gets from the configured one, so
// that shards hash differently: seed + i*Golden, never 0 for a seed that
// is not 0 (0 would draw shard i's keys from crypto/rand, and a fixed
// seed would no longer fix every shard's table).
func shardSeed(seed uint64, i int) uint64 {
	if seed == 0 {
		return 0
	}
	if s := seed + uint64(i)*splitmix.Golden; s != 0 {
		return s
	}
	return splitmix.Mix64(seed) // not 0: Mix64 is a bijection with Mix64(0) = 0
}

// shard is the shard of root, in [0, n).
func (r *router) shard(root uint64) uint64 { return r.h.Range(root, r.n) }
