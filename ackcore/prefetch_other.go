//go:build !amd64

package ackcore

// prefetchSlots is a no-op where no prefetch instruction is wired up;
// Apply then relies on the core's own out-of-order overlap.
func prefetchSlots(base *entry, ctrl *group, hs *uint64, n int) {}
