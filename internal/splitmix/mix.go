// Package splitmix holds the 64-bit mixing functions the other packages share:
// SplitMix64's finaliser and step (Steele, Lea and Flood, "Fast
// splittable pseudorandom number generators", OOPSLA 2014), and a seed
// drawn from crypto/rand. A leaf: it imports nothing of the project.
//
// # Layout
//
// One constant, four functions, no state.
//
// # Concurrency
//
// All are safe from any goroutine; Step advances only the word it is given.
//
// # Invariants
//
// Mix64 is a bijection on uint64 (each step — xor-shift, multiply by an odd
// constant — is invertible), so distinct inputs never collide.
package splitmix

import (
	"crypto/rand"
	"encoding/binary"
)

// Golden is 2^64 divided by the golden ratio, rounded to odd: SplitMix64's
// increment, and the multiplier of Fibonacci hashing (consecutive integers
// times Golden spread evenly over the 64-bit ring). The one copy of it in
// the project.
const Golden = 0x9e3779b97f4a7c15

// Mix64 is SplitMix64's finaliser: a bijection that spreads every input
// bit over every output bit.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Step advances the SplitMix64 generator *s by the golden-ratio increment
// and returns its next output: a way to turn one seed into several
// well-mixed keys.
func Step(s *uint64) uint64 {
	*s += Golden
	return Mix64(*s)
}

// Nth is the n-th output of a SplitMix64 generator seeded with 0, without
// stepping through the first n-1: a well-mixed id for index n. Distinct n
// give distinct outputs.
func Nth(n uint64) uint64 { return Mix64(n * Golden) }

// Seed returns 64 bits from crypto/rand, for hash keys that must stay
// secret (a known key lets a client pick ids that collide).
func Seed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's contract since Go 1.24)
	return binary.LittleEndian.Uint64(b[:])
}
