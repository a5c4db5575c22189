package ackcore

import (
	"time"

	"github.com/xorack/xorack/internal/invariants"
)

// Shard is a single-writer acker: one goroutine owns it and calls Apply and
// Expire; nothing in it is safe for concurrent use. See doc.go.
type Shard struct {
	t          table
	clock      Clock
	timing                // start and timeout beside the deadline (timing.go)
	nearTimers            // deadlines due soon (near.go)
	fails      failFilter // FAILs over the bound (failfilter.go)
	orphanQ    orphanFIFO // roots of entries without INIT, oldest first (orphans.go)
	orphans    int        // entries without INIT now in the table
	progress              // last progress per slot, with ProgressTimeout (progress.go)

	tickNs      int64
	defNs       int64  // default timeout, ns
	defTicks    uint64 // default timeout in whole ticks
	defMs       uint32 // the default timeout in ms when that is whole (a TimeoutMs that asks for the default), else 0
	maxPending  int
	failReserve int // entries FAILs may make beyond maxPending

	// Per-call time, set at the top of Apply and Expire.
	nowNs       int64
	nowTick     uint64
	defDeadline uint64 // deadlineAfter(defNs) at nowNs
	skewNs      int64  // how far the shard's time lags the clock's (jumps beyond maxStepTicks)

	stats    Stats
	prefetch bool                     // the portable loop: prefetch table lines a chunk ahead (large tables only)
	far      bool                     // the assembly loop: ackRunFar (tables past farAbove)
	hs       [2][prefetchChunk]uint64 // home slots of the chunk being applied and the next
	runRing  []uint64                 // ackRun's look-ahead (ackrun.go), made where ackRun runs

	// Owners (owners.go): the owner of the messages being applied, the
	// shift of the owner in an orphan's word, each owner's orphans now and
	// refusals, and the most orphans an owner may have.
	owner        int
	ownerShift   uint8
	ownerOrphans []int32
	ownerRefused []uint64
	orphanShare  int
}

// NewShard makes a shard, allocating its table for cfg.MaxPending entries.
func NewShard(cfg Config) (*Shard, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	s := &Shard{
		t:           newTable(cfg.MaxPending, newKeys(cfg.Seed)),
		clock:       cfg.Clock,
		tickNs:      int64(cfg.Tick),
		defNs:       int64(cfg.Timeout),
		maxPending:  cfg.MaxPending,
		failReserve: failReserveFor(cfg.MaxPending),
	}
	s.side.keys = &s.t.keys
	s.initOwners(cfg)
	s.defTicks = uint64(s.defNs / s.tickNs)
	if s.defNs%int64(time.Millisecond) == 0 {
		s.defMs = uint32(s.defNs / int64(time.Millisecond))
	}
	s.nowNs = max(int64(s.clock.Now()), 0)
	s.setNow()
	s.fails.span = max(s.defTicks, 1)
	s.fails.gen = s.nowTick / s.fails.span
	s.initNear()
	s.prefetch = s.t.bytes() > prefetchAbove
	s.far = s.t.bytes() > farAbove
	if haveAckRun {
		s.runRing = newRunRing()
	}
	if cfg.ProgressTimeout {
		s.initProgress(cfg)
	}
	return s, nil
}

// Stats returns the shard's counters.
func (s *Shard) Stats() Stats {
	st := s.stats
	st.Pending = s.t.count
	return st
}

// Tick is the shard's timer resolution: Expire is due once per Tick.
func (s *Shard) Tick() time.Duration { return time.Duration(s.tickNs) }

// Pending is the number of entries in the table.
func (s *Shard) Pending() int { return s.t.count }

// MaxPending is the configured bound.
func (s *Shard) MaxPending() int { return s.maxPending }

// TableBytes is the memory the shard holds now: the table, the ext array
// and side map (timing.go), the near wheel and due lists (near.go), the
// orphan FIFO (orphans.go), the FAIL filter, the progress ticks
// (progress.go), the per-owner counters (owners.go) and ackRun's
// look-ahead (ackrun.go).
func (s *Shard) TableBytes() int {
	return s.t.bytes() + s.timingBytes() + s.nearBytes() + s.orphanQ.bytes() + s.fails.bytes() + s.progressBytes() + int(ownerBytes(len(s.ownerOrphans))) + len(s.runRing)*8
}

// StopAll empties the shard: every pending root with an INIT is reported
// Failed{stopped} (appended to out, which grows as needed), the others are
// counted as orphans. The shard stays usable.
func (s *Shard) StopAll(out []Outcome) []Outcome {
	s.setNow()
	for slot := range s.t.e {
		for s.t.e[slot].key != 0 { // a remove may shift another entry into slot
			out = s.endEntry(slot, s.deadlineOf(&s.t.e[slot]), ReasonStopped, out)
		}
	}
	if invariants.Enabled {
		s.check()
	}
	return out
}
