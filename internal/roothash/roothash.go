// Package roothash is the project's keyed root hash: the one function for
// every place a root id is spread (a shard's table in package ackcore, the
// shards of package acker), so that what holds for the table's homes
// (structured ids scatter under every key) holds for the shards too.
//
// Root ids are not random in practice: engines derive them from source
// offsets, partitions and clocks (i<<16, ms<<22|seq, offset<<16|partition).
// A multiplicative hash of root^seed keeps the spacing of such ids: the
// difference of two homes does not depend on the seed, so ids that cluster
// under one seed cluster under every seed. Mix is a folded multiply
// followed by a multiply: the 128-bit product of root^k1 and k2, high word
// XOR low word, times k3. The folded product makes every bit of the root
// reach every bit of the word, with the keys entering non-linearly, so
// which ids share a home depends on the keys; the last multiply carries
// the low bits, where structured ids leave the folded word most regular,
// up into the high bits that Lemire's fast range reads. (The folded
// product alone still clustered Snowflake-style ids under some keys:
// mean probe distance up to 18 at the 2/3 load bound, against 1.0; with
// the multiply, every pattern in ackcore's TestStructuredIDsScatter stays
// at 1.0 under every key tried.)
//
// The keys are secret: with them known, an adversary can pick roots that
// share one home, and a run of k such roots costs O(k) per message. The
// default keys come from crypto/rand; a non-zero seed (tests, benchmarks)
// derives them from a fixed number instead.
//
// # Layout
//
// Mix and NewKeys, which ackcore's table uses directly (and its assembly
// computes the same), and Hash, the keyed hash as a value, which package
// acker routes roots with.
//
// # Concurrency
//
// No state: a Hash is immutable after New and safe from any goroutine.
//
// # Invariants
//
// k2 and k3 are odd, so that neither product drops the low bit.
package roothash

import (
	"crypto/rand"
	"encoding/binary"
	"math/bits"

	"github.com/xorack/xorack/internal/splitmix"
)

// Keys are the three words Mix is keyed with.
type Keys struct{ K1, K2, K3 uint64 }

// Mix hashes a root id: the folded 128-bit product of root^k1 and k2,
// times k3.
func Mix(root, k1, k2, k3 uint64) uint64 {
	hi, lo := bits.Mul64(root^k1, k2)
	return (hi ^ lo) * k3
}

// NewKeys returns the hash keys for a seed: three words from crypto/rand
// when seed is 0, else three words derived from seed by SplitMix64. K2 and
// K3 are odd.
func NewKeys(seed uint64) Keys {
	var k Keys
	if seed == 0 {
		var b [24]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand's contract since Go 1.24)
		k = Keys{binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:16]), binary.LittleEndian.Uint64(b[16:])}
	} else {
		s := seed
		k = Keys{splitmix.Step(&s), splitmix.Step(&s), splitmix.Step(&s)}
	}
	k.K2 |= 1
	k.K3 |= 1
	return k
}

// Hash is the keyed root hash as a value, for spreading roots outside a
// shard's table: package acker routes roots to shards with it.
type Hash struct{ k Keys }

// New returns the hash keyed from seed as a shard's table is (seed 0:
// keys from crypto/rand). Two users of one seed hash alike: give each its
// own (acker derives the router's seed from its Seed, not the shards').
func New(seed uint64) Hash { return Hash{NewKeys(seed)} }

// Sum is root's 64-bit hash.
func (h *Hash) Sum(root uint64) uint64 { return Mix(root, h.k.K1, h.k.K2, h.k.K3) }

// Range maps root to [0, n): the high word of Sum(root) × n (Lemire's fast
// range reduction, as a table finds a home: no division, any n).
func (h *Hash) Range(root, n uint64) uint64 {
	r, _ := bits.Mul64(h.Sum(root), n)
	return r
}
