package ackcore

import "time"

// Internals the external tests reach.
const (
	ExpireScanLimit  = expireScanLimit
	ExpireEntryLimit = expireEntryLimit
)

// ExpireAll is expireAll, for the external tests.
func (s *Shard) ExpireAll(out []Outcome) []Outcome { return s.expireAll(out) }

// Owners is owners, for the external tests.
func (s *Shard) Owners() int { return s.owners() }

// ProgressCap is progressCap, for the external tests.
func (s *Shard) ProgressCap() time.Duration { return s.progressCap() }
