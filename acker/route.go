package acker

import (
	"math/bits"

	"github.com/xorack/xorack/internal/splitmix"
)

// router maps a root to the shard that owns it (docs/semantics.md, rule 9:
// every message of a root goes to one shard). It is immutable after New
// and shared by every producer.
//
// The mix is a keyed folded multiply: the 128-bit product of (root XOR k1)
// and k2 (odd), its two halves XORed. Every output bit depends on every
// input bit and on both keys, so the spacing of structured ids (i<<16,
// timestamps in the high bits, a partition in the low bits) does not carry
// over to the shards, and without the keys no one can pick ids that pile
// onto one shard. The shard is then the high word of mix × n (Lemire's fast
// range reduction: no division, any n). It is independent of the shards'
// own table hashes, which have seeds of their own.
type router struct {
	k1, k2 uint64
	n      uint64 // shards
}

func newRouter(seed uint64, shards int) router {
	if seed == 0 {
		seed = splitmix.Seed()
	}
	k1 := splitmix.Step(&seed)
	k2 := splitmix.Step(&seed) | 1
	return router{k1: k1, k2: k2, n: uint64(shards)}
}

// shard is the shard of root, in [0, n).
func (r router) shard(root uint64) uint64 {
	hi, lo := bits.Mul64(root^r.k1, r.k2)
	s, _ := bits.Mul64(hi^lo, r.n)
	return s
}
