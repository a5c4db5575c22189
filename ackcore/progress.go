package ackcore

import "time"

// Progress timeouts (Config.ProgressTimeout). A tree that is making
// progress behind a slow bolt should not time out and replay, adding load
// exactly when the system is slowest (Storm's STORM-2359); one whose
// tuple is stuck should still time out one timeout after its last
// progress. So with ProgressTimeout a root's deadline is
//
//	max(its own deadline, min(last progress + timeout, start + ProgressCap))
//
// where its own deadline is what INIT and RESET set (rule 5), progress is
// its INIT or any ACK of it, and start its INIT. Moving the deadline on
// every ACK would cost a timer update per ACK; instead each ACK stores
// the tick it came at (rounded up, as starts are) in prog, a uint32 per
// slot beside the table that moves with its entry as ext does, and the
// deadline is moved lazily: when a root's own deadline comes, Expire
// looks at its last progress and, if progress came since the deadline
// was set (last progress + timeout is later), re-arms it at that time,
// capped, instead of failing it. A root re-armed so keeps its start (its
// latency runs from the INIT), with its timing kind chosen anew
// (timing.go): the default timeout moved X ticks on, in the slot, while X
// fits. At that re-armed deadline the same look happens again, so the
// root times out at the first tick at or after its last progress plus its
// timeout, never early, as if each ACK had moved the deadline.
//
// The assembly loop keeps no progress, so a shard with ProgressTimeout
// applies its batches with the portable loop (fastPath), which stores
// the tick with each ACK's val: one predictable branch and one 32-bit
// store per ACK there, nothing without the option. Memory: 4 bytes a
// slot (5.3 a root at the 3/4 load bound), allocated by NewShard.

// DefaultProgressCap is ProgressCap's default in timeouts: progress keeps
// a root alive for at most ten timeouts after its INIT, the engine's
// default RESET cap.
const DefaultProgressCap = 10

// progress is the per-slot last-progress ticks and the cap, in ticks.
type progress struct {
	prog    []uint32 // prog[slot]: tick of the entry's last INIT or ACK, mod 2^32; nil without ProgressTimeout
	capTick uint64   // ProgressCap in ticks
	progNow uint32   // what an ACK stores now: nowStart, set per call (setNow)
}

func (s *Shard) initProgress(cfg Config) {
	s.prog = make([]uint32, s.t.n)
	s.capTick = uint64(cfg.ProgressCap / cfg.Tick) // filled by validate
}

// progressDeadline is the deadline the progress of the INITed entry in
// slot, due at deadline, moves it to; ok is false when no progress came
// since that deadline was set, or the cap is reached, and the root is due.
func (s *Shard) progressDeadline(slot int, e *entry, deadline uint64) (uint64, bool) {
	start, timeout := s.startTimeout(slot, e, deadline)
	last := s.expand(s.prog[slot])
	to := uint64((timeout + s.tickNs - 1) / s.tickNs)
	d := min(last+to, start+s.capTick)
	return d, d > deadline && d > s.nowTick
}

// rearm moves the deadline of the entry in slot to d, keeping its start
// and timeout.
func (s *Shard) rearm(slot int, d uint64) {
	var c cur
	s.loadAt(&c, s.t.e[slot].key, slot, true)
	s.loadTiming(&c)
	c.deadline, c.resched = d, true
	s.store(&c)
}

// progressCap is the longest progress keeps a root alive after its INIT,
// 0 without ProgressTimeout.
func (s *Shard) progressCap() time.Duration {
	if s.prog == nil {
		return 0
	}
	return time.Duration(s.capTick) * time.Duration(s.tickNs)
}

// progressBytes is prog's memory.
func (s *Shard) progressBytes() int { return 4 * len(s.prog) }
