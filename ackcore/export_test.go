package ackcore

// Verify exposes the invariant checker to the external tests.
func (s *Shard) Verify() error { return s.verify() }

// SetAckRun turns the assembly loop on or off (where the CPU has it) and
// returns a func that restores the previous setting.
func SetAckRun(on bool) (restore func()) {
	prev := haveAckRun
	haveAckRun = on && prev
	return func() { haveAckRun = prev }
}

// AckRunAvailable reports whether this CPU runs the assembly loop.
func AckRunAvailable() bool { return haveAckRun }
