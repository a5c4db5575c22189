package ackcore

// prefetchSlots prefetches the lines of the probe windows at slots[:n] of the
// table starting at base. Implemented in prefetch_amd64.s.
//
//go:noescape
func prefetchSlots(base *entry, slots *uint64, n int)
