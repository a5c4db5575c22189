package ackcore

// prefetchSlots prefetches, for each of hs[:n] (home group << 8 | tag),
// the slot its probe will most likely end at, in the table whose slots
// start at base and control words at ctrl. Implemented in
// prefetch_amd64.s.
//
//go:noescape
func prefetchSlots(base *entry, ctrl *group, hs *uint64, n int)
