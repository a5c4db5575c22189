package ackcore

// The Apply pipeline: chunks and prefetching, the fast path (fastPath in
// Go, ackRun in assembly: ackrun.go) and the hand-off to the rules (step,
// rules.go) for everything else.

import (
	"math/bits"

	"github.com/xorack/xorack/internal/invariants"
)

// prefetchAbove is the table size past which Apply prefetches a chunk's
// lines ahead: below it the table lives in L2 and the prefetch pass only
// adds instructions (measured on a 2-vCPU Zen 5 VM: dependent random loads
// take 9.5 ns over 1 MiB, 145 ns over 16 MiB).
const prefetchAbove = 1 << 20

// Apply applies msgs in order and appends the outcomes they cause to out,
// which it returns. Each message causes at most one outcome, so an out with
// spare capacity len(msgs) is never grown and Apply allocates nothing.
// Malformed messages are answered with Refused{invalid} and counted.
func (s *Shard) Apply(msgs []Msg, out []Outcome) []Outcome {
	s.setNow()
	// Software pipeline: hash chunk k+1 and prefetch its lines, then apply
	// chunk k, whose lines were prefetched one chunk earlier. Chunks start
	// small and double up to prefetchChunk, so that the first messages of a
	// call, which nothing prefetched ahead, are few.
	run := haveAckRun && s.prog == nil // ackRun keeps no progress
	if !s.prefetch {
		if run {
			return s.applyRun(msgs, nil, out)
		}
		return s.applyChunk(msgs, nil, out)
	}
	if len(msgs) == 0 {
		return out
	}
	cur, size := 0, firstChunk
	next := msgs[:min(len(msgs), size)]
	s.homes(next, &s.hs[cur])
	for len(msgs) > 0 {
		chunk := next
		msgs = msgs[len(chunk):]
		size = min(2*size, prefetchChunk)
		next = msgs[:min(len(msgs), size)]
		if len(next) > 0 {
			s.homes(next, &s.hs[cur^1])
		}
		if run {
			out = s.applyRun(chunk, &s.hs[cur], out)
		} else {
			out = s.applyChunk(chunk, &s.hs[cur], out)
		}
		cur ^= 1
	}
	return out
}

// firstChunk is the size of a call's first chunk (see Apply).
const firstChunk = 8

// homes computes the home slot of each message of chunk into hs and, for
// tables larger than L2, prefetches the lines of their probe windows.
func (s *Shard) homes(chunk []Msg, hs *[prefetchChunk]uint64) {
	k, n := s.t.keys, s.t.n
	for i := range chunk {
		hs[i], _ = bits.Mul64(mix(chunk[i].Root, &k), n)
	}
	if s.prefetch && len(chunk) > 0 {
		prefetchSlots(&s.t.e[0], &hs[0], len(chunk))
	}
}

// prefetchChunk is how many messages' table lines are prefetched ahead of
// applying them: enough to keep the ~30 misses one core sustains in flight,
// few enough that the lines are still in L1 when their turn comes. A power
// of two.
const prefetchChunk = 64

func (s *Shard) applyChunk(chunk []Msg, hs *[prefetchChunk]uint64, out []Outcome) []Outcome {
	for i := 0; ; i++ {
		var slot uint64
		i, slot = s.fastPath(chunk, hs, i)
		if i == len(chunk) {
			return out
		}
		m := &chunk[i]
		if e := &s.t.e[slot]; m.Kind == Ack && e.key != 0 && e.word()&(flagInit|kindMask|flagNear) == flagInit {
			// The ACK that completes a root with the default timeout and
			// no near timer (fastPath stops at ACKs that bring val to 0): what
			// step and store would do, without loading a cur.
			s.stats.Acks++
			s.stats.Completed++
			start := s.expand(uint32(e.meta)) - s.defTicks
			out = append(out, Outcome{Root: e.key, Task: e.word() & taskMask, Kind: Completed, Latency: s.latency(start)})
			s.removeSlot(int(slot))
			if invariants.Enabled {
				s.check()
			}
			continue
		}
		out = s.slow(m, int(slot), out)
	}
}

// fastInit reports whether INITs of new roots may take the fast paths: the
// default deadline is far (no near timer needed) and no FAIL is held in
// the filter (every INIT would have to be checked).
func (s *Shard) fastInit() bool { return s.defDeadline >= s.limit && !s.fails.active() }

// fastPath is the portable hot loop, for CPUs without ackRun (see
// applyRun and ackrun_amd64.s). It applies chunk[i:] for as long as each
// message is one of the two
// kinds that make nearly all traffic and touch nothing but their slot: an
// ACK to an existing entry that does not bring its val to 0 (writes one val), and
// an INIT of a new root with the default timeout (TimeoutMs 0 or equal to
// the default), far from due (writes one slot). It returns the index of the first message it did not apply
// (len(chunk) if none) and the slot where that message's probe ended. It
// calls nothing, so that its loop keeps everything in registers.
//
// hs holds the chunk's home slots, computed (and prefetched) a chunk
// ahead; nil means fastPath hashes each root itself.
func (s *Shard) fastPath(chunk []Msg, hs *[prefetchChunk]uint64, i int) (next int, slot uint64) {
	es, k := s.t.e, s.t.keys
	n := uint64(len(es))
	acks := uint64(0)
	fastInit := s.fastInit()
	for ; i < len(chunk); i++ {
		m := &chunk[i]
		root := m.Root
		if root == 0 { // invalid; and a probe for 0 would match an empty slot
			break
		}
		// The probe, from the home slot to the root or the first empty
		// slot, written out here (an inlined probe nearly doubles
		// throughput at large tables: the loop keeps more probes in
		// flight).
		var j uint64
		if hs != nil {
			j = hs[i&(prefetchChunk-1)]
		} else {
			j, _ = bits.Mul64(mix(root, &k), n)
		}
		if j+probeWindow <= n {
			// The first probeWindow slots, compared without branches: a
			// probe's length is random, so a loop over slots mispredicts
			// its exit on about half of all lookups.
			w := (*[probeWindow]entry)(es[j : j+probeWindow])
			k0, k1, k2, k3 := w[0].key, w[1].key, w[2].key, w[3].key
			f := b2u(k0 == root) | b2u(k0 == 0) | (b2u(k1 == root)|b2u(k1 == 0))<<1 |
				(b2u(k2 == root)|b2u(k2 == 0))<<2 | (b2u(k3 == root)|b2u(k3 == 0))<<3 | 1<<probeWindow
			if j += uint64(bits.TrailingZeros(f)); j == n {
				j = 0
			}
		}
		for {
			if k := es[j].key; k == root || k == 0 {
				break
			}
			if j++; j == n {
				j = 0
			}
		}
		e := &es[j]
		if e.key != 0 {
			if m.Kind != Ack {
				slot = j
				break
			}
			nv := e.val ^ m.Val
			if nv == 0 {
				slot = j
				break // completes the root, or ends a drain (step)
			}
			e.val = nv
			if p := s.prog; p != nil { // ProgressTimeout: one store per ACK (read here: no register held for it)
				p[j] = s.progNow
			}
			acks++
			continue
		}
		if m.Kind != Init || m.TimeoutMs != 0 && m.TimeoutMs != s.defMs || m.Val == 0 || m.Task > MaxTask ||
			s.t.count >= s.maxPending || !fastInit {
			slot = j
			break
		}
		// insertSlot, written out: the Robin Hood position p, then the run
		// from p to j shifted forward by one. A shift round the end of the
		// table while a pass runs may cross the pass: left to slow.
		p, d := j, uint64(0)
		if h, _ := bits.Mul64(mix(root, &k), n); h != j {
			for p = h; p != j; d++ {
				rd := es[p].storedDist()
				if rd == distSat {
					break // a distance to recompute: left to slow
				}
				if rd < d {
					break
				}
				if p++; p == n {
					p = 0
				}
			}
			if d >= distSat-1 || p != j && (es[p].storedDist() == distSat || p > j && s.scan >= 0) {
				slot = j // rare: saturated distances, or a shift that may cross a pass
				break
			}
			s.shiftUp(p, j)
		}
		es[p] = entry{key: root, val: m.Val, meta: uint64(flagInit|m.Task)<<32 | d<<(32+distShift) | uint64(uint32(s.defDeadline))}
		if pr := s.prog; pr != nil {
			pr[p] = s.progNow
		}
		s.t.count++
		s.stats.Inits++
		if invariants.Enabled {
			s.check()
		}
	}
	s.stats.Acks += acks
	return i, slot
}

// slow applies m, whose probe ended at slot, through step: everything but
// the fast path of applyChunk.
//
//go:noinline
func (s *Shard) slow(m *Msg, slot int, out []Outcome) []Outcome {
	var c cur
	if m.Root == 0 {
		return s.step(&c, m, out)
	}
	s.loadAt(&c, m.Root, slot, s.t.e[slot].key != 0)
	out = s.step(&c, m, out)
	s.store(&c)
	return out
}

// probeWindow is the number of slots fastPath compares at once before it
// walks on slot by slot.
const probeWindow = 4

// b2u is 1 for true (SETcc on amd64): four of these make fastPath's window
// mask without branches.
func b2u(b bool) uint {
	if b {
		return 1
	}
	return 0
}
