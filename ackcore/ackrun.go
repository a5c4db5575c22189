package ackcore

import (
	"time"
	"unsafe"

	"github.com/xorack/xorack/internal/invariants"
)

// runState is what ackRun reads and updates. Its layout is fixed: the
// assembly addresses its fields by offset (TestRunStateLayout).
type runState struct {
	es         *entry    // 0
	n          uint64    // 8
	k1         uint64    // 16: the hash keys (mix)
	out        *Outcome  // 24: out's backing array
	outLen     int       // 32
	outCap     int       // 40
	nowTick    uint64    // 48
	nowNs      int64     // 56
	tickNs     int64     // 64
	defTicks   uint64    // 72
	scan       int       // 80: the running pass's cursor, -1 for none
	count      int       // 88: entries in the table
	maxPending int       // 96
	initMeta   uint64    // 104: uint32(default deadline) | 1<<32 when it is far (INITs may be inserted)
	inits      uint64    // 112
	completed  uint64    // 120
	save       [3]uint64 // 128
	k2         uint64    // 152
	k3         uint64    // 160
	defMs      uint64    // 168: the TimeoutMs that asks for the default (Shard.defMs), 0 for none
	hs         *uint64   // 176: ackRunHS: the home slots of msgs
	nm4        int64     // 184: n-4, written by ackRun (the last home whose probe window fits)
	ext        *uint16   // 192: &Shard.ext[0], or nil while there is none
	extDrops   uint64    // 200: entries of timing kind 1 or 2 completed (extCount goes down by as many)
	extAdds    uint64    // 208: INITs inserted as timing kind 1 (extCount goes up by as many)
	xok        uint64    // 216: 1 when INITs with their own timeout may be inserted (1 ms ticks, an ext array)
	nowStart   uint64    // 224: Shard.nowStart()
	limit      uint64    // 232: Shard.limit: deadlines before it need a near timer
	insx       uint64    // 240: ackRun's scratch: the timeout of the INIT being inserted, 0 for the default
}

// What ackRun did with the message it stopped at.
const (
	probeNone    = iota // not probed
	probeHit            // the slot holds the root
	probeMiss           // the slot is the first empty one on the root's probe
	probeCrossed        // (not stopped) a completion's shift crossed the pass cursor
)

// applyRun is Apply's loop on CPUs with AVX2: ackRun applies the common
// messages (ACKs, completions of roots with the default timing, default
// INITs) in one assembly loop that compares a probe window's four keys in
// two vector compares and calls nothing; the message it stops at goes
// through slow, with the probe it got.
//
// hs, when not nil, holds msgs' home slots, which Apply computed a chunk
// ahead with its prefetches: ackRunHS then reads them instead of hashing.
func (s *Shard) applyRun(msgs []Msg, hs *[prefetchChunk]uint64, out []Outcome) []Outcome {
	if len(msgs) == 0 {
		return out
	}
	st := runState{
		es: &s.t.e[0], n: s.t.n, k1: s.t.k1, k2: s.t.k2, k3: s.t.k3,
		nowTick: s.nowTick, nowNs: s.nowNs, tickNs: s.tickNs, defTicks: s.defTicks,
		maxPending: s.maxPending, defMs: uint64(s.defMs),
	}
	acks := uint64(0)
	for i := 0; i < len(msgs); {
		// What the last slow message may have changed: the pass, the
		// FAIL filter, the ext array.
		st.out, st.outLen, st.outCap = unsafe.SliceData(out), len(out), cap(out)
		st.initMeta = uint64(uint32(s.defDeadline))
		if s.fastInit() {
			st.initMeta |= 1 << 32
		}
		st.ext, st.xok = nil, 0
		if s.ext != nil {
			st.ext = &s.ext[0]
			if s.tickNs == int64(time.Millisecond) {
				st.xok = 1
			}
		}
		st.nowStart, st.limit = s.nowStart(), s.limit
		st.scan, st.count = s.scan, s.t.count
		var done, probe int
		var slot, a uint64
		if hs != nil {
			st.hs = &hs[i]
			done, slot, probe, a = ackRunHS(&st, &msgs[i], len(msgs)-i)
		} else {
			done, slot, probe, a = ackRun(&st, &msgs[i], len(msgs)-i)
		}
		out = out[:st.outLen]
		s.t.count = st.count
		s.extCount += int(st.extAdds) - int(st.extDrops)
		st.extDrops, st.extAdds = 0, 0
		acks += a
		i += done
		if probe == probeCrossed && s.scan > 0 {
			s.rescan(&s.t.e[s.scan-1]) // moved behind the running pass
		}
		if invariants.Enabled {
			s.check()
		}
		if probe == probeCrossed {
			continue
		}
		if i == len(msgs) {
			break
		}
		m := &msgs[i]
		if probe == probeNone && m.Root != 0 {
			sl, _ := s.t.find(m.Root)
			slot = uint64(sl)
		}
		out = s.slow(m, int(slot), out)
		i++
	}
	s.stats.Acks += acks
	s.stats.Inits += st.inits
	s.stats.Completed += st.completed
	return out
}
