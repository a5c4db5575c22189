package ackcore

import (
	"time"
	"unsafe"

	"github.com/xorack/xorack/internal/invariants"
	"github.com/xorack/xorack/internal/layout"
)

// runState is what ackRun reads and updates. The assembly addresses its
// fields through go_asm.h (runState_es, ...); some only the assembly
// uses.
type runState struct {
	es         *entry   // the slots
	ctrl       *group   // the control words
	ng         uint64   // groups
	k1, k2, k3 uint64   // the hash keys (mix)
	out        *Outcome // out's backing array
	outLen     int
	outCap     int
	nowTick    uint64
	nowNs      int64
	tickNs     int64
	latBase    int64 // nowNs + tickNs/2 - (nowTick - defTicks)*tickNs: a kind-0 completion's latency less its deadline's distance from nowTick in ns
	defTicks   uint64
	count      int // entries in the table
	maxPending int
	initMeta   uint64 // uint32(default deadline) | 1<<32 when it is far (INITs may be inserted)
	inits      uint64
	completed  uint64
	defMs      uint64  // the TimeoutMs that asks for the default (Shard.defMs), 0 for none
	ext        *uint16 // &Shard.ext[0], or nil while there is none
	extDrops   uint64  // entries of timing kind 1 or 2 completed (extCount goes down by as many)
	extAdds    uint64  // INITs inserted as timing kind 1 (extCount goes up by as many)
	xok        uint64  // 1 when INITs with their own timeout may be inserted (1 ms ticks, an ext array)
	nowStart   uint64  // Shard.nowStart()
	limit      uint64  // Shard.limit: deadlines before it need a near timer
	insx       uint64  //lint:ignore U1000 ackRun's scratch: the timeout of the INIT being inserted, 0 for the default
	ring       *uint64 //lint:ignore U1000 ackRun's look-ahead (Shard.runRing): 32 bytes a message, home group * 16, the hash's low word (its top byte the tag, 0 not yet taken as 1), predicted slot * 3, unused
	end        uint64  //lint:ignore U1000 ackRun's scratch: the end of the messages with PFD1 more after them
}

// runMsgs is the most messages one ackRun call applies: its look-ahead
// has an entry for each, at the message's own offset from the first (so
// that the loop addresses a message's entry from the message's address,
// with no ring index to keep).
const runMsgs = 256

// runRingWords is the size of Shard.runRing in words: four a message.
const runRingWords = runMsgs * 4

// newRunRing returns ackRun's look-ahead entries, on a cache-line
// boundary so that no entry straddles two lines.
func newRunRing() []uint64 {
	return lineAligned[uint64](runRingWords, layout.CacheLine/8-1)[:runRingWords:runRingWords]
}

// The assembly steps through msgs and out 32 bytes at a time (shifts by
// 5) and writes a Completed outcome as four words: these fail to compile
// if the sizes change.
var (
	_ [unsafe.Sizeof(Msg{}) - 32]struct{}
	_ [32 - unsafe.Sizeof(Msg{})]struct{}
	_ [unsafe.Sizeof(Outcome{}) - 32]struct{}
	_ [32 - unsafe.Sizeof(Outcome{})]struct{}
)

// What ackRun did with the message it stopped at.
const (
	probeNone = iota // not probed, or the root is not in the table: the caller probes
	probeHit         // the slot holds the root
)

// applyRun is Apply's loop on CPUs with AVX2: ackRun applies the common
// messages (ACKs, completions of roots with the default timing, default
// INITs) in one assembly loop that compares a group's fifteen tags in one
// vector compare and calls nothing; the message it stops at goes through
// slow, with the probe it got. Tables past farAbove take ackRunFar, the
// same loop looking further ahead.
func (s *Shard) applyRun(msgs []Msg, out []Outcome) []Outcome {
	if len(msgs) == 0 {
		return out
	}
	if s.runRing == nil { // made while ackRun was off (tests)
		s.runRing = newRunRing()
	}
	st := runState{
		es: &s.t.e[0], ctrl: &s.t.ctrl[0], ng: s.t.ng, k1: s.t.k1, k2: s.t.k2, k3: s.t.k3, ring: &s.runRing[0],
		nowTick: s.nowTick, nowNs: s.nowNs, tickNs: s.tickNs, defTicks: s.defTicks,
		maxPending: s.maxPending, defMs: uint64(s.defMs),
	}
	st.latBase = int64(uint64(s.nowNs) + uint64(s.tickNs)>>1 - (s.nowTick-s.defTicks)*uint64(s.tickNs))
	acks := uint64(0)
	for i := 0; i < len(msgs); {
		// What the last slow message may have changed: the limit, the
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
		st.count = s.t.count
		inits := st.inits
		n := min(len(msgs)-i, runMsgs)
		var done, probe int
		var slot uint64
		if s.far { // a table past farAbove: look further ahead
			done, slot, probe = ackRunFar(&st, &msgs[i], n)
		} else {
			done, slot, probe = ackRun(&st, &msgs[i], n)
		}
		out = out[:st.outLen]
		s.t.count = st.count
		s.extCount += int(st.extAdds) - int(st.extDrops)
		st.extDrops, st.extAdds = 0, 0
		acks += uint64(done) - (st.inits - inits) // ackRun applies ACKs and INITs it inserts
		i += done
		if invariants.Enabled {
			s.check()
		}
		if i == len(msgs) {
			break
		}
		if done == n { // a full run: on to the next
			continue
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
