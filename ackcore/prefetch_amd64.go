package ackcore

// prefetchGroups prefetches the key and val lines of groups[:n] of kv.
// Implemented in prefetch_amd64.s.
//
//go:noescape
func prefetchGroups(kv *uint64, groups *uint64, n int)
