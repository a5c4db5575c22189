package ackcore

import "github.com/xorack/xorack/internal/numfield"

// Stats are a shard's exact counters since it was made. Every outcome is
// counted once. Every well-formed message is counted once under its kind
// (Inits, Acks, Fails, Resets), whether it was applied or refused at the
// bound: the refused ones are counted again under FailedFull (INIT) or
// RefusedFull (ACK, RESET), or, refused at their owner's orphan share,
// under OrphansRefused (ACK, FAIL, RESET). A malformed message is counted only under
// RefusedInvalid.
type Stats struct {
	Inits, Acks, Fails, Resets uint64 // well-formed messages, by kind (refused ones included)

	Completed      uint64 // roots reported Completed
	FailedExplicit uint64 // roots reported Failed{explicit}
	FailedTimeout  uint64 // roots reported Failed{timeout}
	FailedFull     uint64 // INITs refused for lack of room, reported Failed{full}
	FailedStopped  uint64 // roots still pending when the acker stopped (StopAll)
	Orphans        uint64 // entries that never saw INIT and expired silently

	RefusedFull    uint64 // ACKs and RESETs that needed a new entry but found the bound reached
	RefusedInvalid uint64 // malformed messages

	// A FAIL is never refused (rule 3). One that needs a new entry at the
	// bound takes one of the FAIL reserve's entries beyond MaxPending
	// (FailsReserved) or, with those used up too, is held in the overflow
	// filter (FailsFiltered), or, past the filter's budget, dropped: its
	// root times out instead (FailsDropped); see failfilter.go.
	FailsReserved uint64
	FailsFiltered uint64
	FailsDropped  uint64

	// OrphansEvicted counts entries without INIT that gave way to an
	// INIT, or to an ACK or RESET for another root, at the bound
	// (orphans.go). Orphans counts those that expired.
	OrphansEvicted uint64
	// OrphansRefused counts ACKs, FAILs and RESETs for roots with no
	// entry refused (Refused{full}) because their owner had its
	// OrphanShare of orphans in the table (owners.go); they are counted
	// under their kind too, and not under RefusedFull.
	OrphansRefused uint64
	// OrphansDrained counts drains removed by their tree's last ACK: the
	// orphans a FAIL that carried the failed tuple's ack val left (rule 3
	// of docs/semantics.md). A drain that expires first is counted under
	// Orphans, one evicted under OrphansEvicted.
	OrphansDrained uint64

	Pending int // entries now in the table, with or without INIT
}

// Add accumulates o into s (for aggregating shards): every counter,
// Pending too.
func (s *Stats) Add(o Stats) { numfield.Add(s, &o) }

// Failed is the number of roots reported Failed, whatever the reason.
func (s *Stats) Failed() uint64 {
	return s.FailedExplicit + s.FailedTimeout + s.FailedFull + s.FailedStopped
}
