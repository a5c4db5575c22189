package ackcore

import "github.com/xorack/xorack/internal/roothash"

// The home hash: package internal/roothash's keyed hash (why a folded
// multiply and a multiply, why secret keys), the one function for every
// place a root id is spread; package acker routes roots to shards with the
// same hash under keys of its own. See BenchmarkShardIDs and
// TestStructuredIDsScatter.

// keys are the three words mix is keyed with.
type keys struct{ k1, k2, k3 uint64 }

// mix hashes a root id for the table (roothash.Mix). ackRun
// (ackrun_amd64.s) computes the same.
func mix(root uint64, k *keys) uint64 { return roothash.Mix(root, k.k1, k.k2, k.k3) }

// newKeys returns the table's hash keys for a seed (roothash.NewKeys: from
// crypto/rand when seed is 0).
func newKeys(seed uint64) keys {
	k := roothash.NewKeys(seed)
	return keys{k.K1, k.K2, k.K3}
}
