//go:build !amd64

package ackcore

// prefetchGroups is a no-op where no prefetch instruction is wired up;
// Apply then relies on the core's own out-of-order overlap.
func prefetchGroups(kv *uint64, groups *uint64, n int) {}
