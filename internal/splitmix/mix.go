// Package splitmix holds the 64-bit mixing functions the other packages share:
// SplitMix64's finaliser and step (Steele, Lea and Flood, "Fast
// splittable pseudorandom number generators", OOPSLA 2014), and a seed
// drawn from crypto/rand. A leaf: it imports nothing of the project.
//
// # Layout
//
// Three functions, no state.
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
	*s += 0x9e3779b97f4a7c15
	return Mix64(*s)
}

// Seed returns 64 bits from crypto/rand, for hash keys that must stay
// secret (a known key lets a client pick ids that collide).
func Seed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's contract since Go 1.24)
	return binary.LittleEndian.Uint64(b[:])
}
