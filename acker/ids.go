package acker

import "math/rand/v2"

// EdgeID returns a random, non-zero 64-bit id: one per tuple a spout or
// bolt emits (the values XORed into a root's ack val), and one per root.
// A root's ack val returns to zero when every edge was acked, and early
// only if some edges XOR to zero by chance: with random ids, about one
// chance in 2^64 per message, so ids must not be counters or hashes of
// the payload. A replay is a new root: give it a fresh EdgeID, never the
// failed root's id, whose late ACKs would otherwise count against it.
//
// It draws from math/rand/v2's global source (the runtime's per-thread
// ChaCha8 generator): safe for concurrent use by any number of
// goroutines, allocation-free, a few nanoseconds (BenchmarkEdgeID). The
// ids are unpredictable in practice but not a secret: routing does not
// rely on them (Config.Seed keys it).
func EdgeID() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}
