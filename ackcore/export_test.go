package ackcore

// Verify exposes the invariant checker to the external tests.
func (s *Shard) Verify() error { return s.verify() }
