package ackcore

// Stats are a shard's exact counters since it was made. Every message is
// counted once under its kind (or under Refused*), every outcome once.
type Stats struct {
	Inits, Acks, Fails, Resets uint64 // messages applied, by kind

	Completed      uint64 // roots reported Completed
	FailedExplicit uint64 // roots reported Failed{explicit}
	FailedTimeout  uint64 // roots reported Failed{timeout}
	FailedFull     uint64 // INITs refused for lack of room, reported Failed{full}
	FailedStopped  uint64 // roots still pending when the acker stopped (sharded acker only)
	Orphans        uint64 // entries that never saw INIT and expired silently

	RefusedFull    uint64 // ACK, FAIL or RESET that needed a new entry but found the bound reached
	RefusedInvalid uint64 // malformed messages

	Pending int // entries now in the table, with or without INIT
}

// Add accumulates o into s (for aggregating shards).
func (s *Stats) Add(o Stats) {
	s.Inits += o.Inits
	s.Acks += o.Acks
	s.Fails += o.Fails
	s.Resets += o.Resets
	s.Completed += o.Completed
	s.FailedExplicit += o.FailedExplicit
	s.FailedTimeout += o.FailedTimeout
	s.FailedFull += o.FailedFull
	s.FailedStopped += o.FailedStopped
	s.Orphans += o.Orphans
	s.RefusedFull += o.RefusedFull
	s.RefusedInvalid += o.RefusedInvalid
	s.Pending += o.Pending
}

// Failed is the number of roots reported Failed, whatever the reason.
func (s *Stats) Failed() uint64 {
	return s.FailedExplicit + s.FailedTimeout + s.FailedFull + s.FailedStopped
}
