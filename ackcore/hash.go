package ackcore

import (
	"crypto/rand"
	"encoding/binary"
	"math/bits"

	"github.com/xorack/xorack/internal/splitmix"
)

// The home hash.
//
// Root ids are not random in practice: engines derive them from source
// offsets, partitions and clocks (i<<16, ms<<22|seq, offset<<16|partition).
// A multiplicative hash of root^seed keeps the spacing of such ids: the
// difference of two homes does not depend on the seed, so ids that cluster
// under one seed cluster under every seed. mix is a folded multiply
// followed by a multiply: the 128-bit product of root^k1 and k2, high word
// XOR low word, times k3. The folded product makes every bit of the root
// reach every bit of the word, with the keys entering non-linearly, so
// which ids share a home depends on the keys; the last multiply carries
// the low bits, where structured ids leave the folded word most regular,
// up into the high bits that Lemire's fast range reads. (The folded
// product alone still clustered Snowflake-style ids under some keys:
// mean probe distance up to 18 at the 2/3 load bound, against 1.0; with
// the multiply, every pattern in TestStructuredIDsScatter stays at 1.0
// under every key tried.) See BenchmarkShardIDs.
//
// The keys are secret: with them known, an adversary can pick roots that
// share one home, and a run of k such roots costs O(k) per message. The
// default keys come from crypto/rand, per shard; Config.Seed (tests,
// benchmarks) derives them from a fixed number instead.
//
// The same hash, under keys of its own, routes roots to shards (package
// acker, through Hash): one function for every place a root id is spread,
// so that what holds for the table's homes (structured ids scatter under
// every key) holds for the shards too.

// keys are the three words mix is keyed with.
type keys struct{ k1, k2, k3 uint64 }

// mix hashes a root id for the table: the folded 128-bit product of
// root^k1 and k2, times k3. ackRun (ackrun_amd64.s) computes the same.
func mix(root uint64, k *keys) uint64 {
	hi, lo := bits.Mul64(root^k.k1, k.k2)
	return (hi ^ lo) * k.k3
}

// newKeys returns the hash keys for a seed: three words from crypto/rand
// when seed is 0, else three words derived from seed by SplitMix64. k2 and
// k3 are odd, so that neither product drops the low bit.
func newKeys(seed uint64) keys {
	var k keys
	if seed == 0 {
		var b [24]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand's contract since Go 1.24)
		k = keys{binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:16]), binary.LittleEndian.Uint64(b[16:])}
	} else {
		s := seed
		k = keys{splitmix.Step(&s), splitmix.Step(&s), splitmix.Step(&s)}
	}
	k.k2 |= 1
	k.k3 |= 1
	return k
}

// Hash is the keyed root hash (mix), for spreading roots outside a shard's
// table: package acker routes roots to shards with it. Immutable after
// NewHash; safe for concurrent use.
type Hash struct{ k keys }

// NewHash returns the hash keyed from seed as a shard's table is (seed 0:
// keys from crypto/rand). Two users of one seed hash alike: give each its
// own (acker derives the router's seed from its Seed, not the shards').
func NewHash(seed uint64) Hash { return Hash{newKeys(seed)} }

// Sum is root's 64-bit hash.
func (h *Hash) Sum(root uint64) uint64 { return mix(root, &h.k) }

// Range maps root to [0, n): the high word of Sum(root) × n (Lemire's fast
// range reduction, as the table finds a home: no division, any n).
func (h *Hash) Range(root, n uint64) uint64 {
	r, _ := bits.Mul64(mix(root, &h.k), n)
	return r
}
