package ackcore

// The Apply pipeline: chunks and prefetching, the fast path (fastPath in
// Go, ackRun in assembly: ackrun.go) and the hand-off to the rules (step,
// rules.go) for everything else.

import (
	"math/bits"
	"unsafe"

	"github.com/xorack/xorack/internal/invariants"
)

// prefetchAbove is the table size past which Apply prefetches a chunk's
// lines ahead. Below it the table stays in the last-level cache, where the
// core's own out-of-order execution overlaps the misses of neighbouring
// messages, and the prefetch pass (hashing a chunk ahead, reading each
// control word, about 75 instructions a message) costs more than it
// saves. Measured on a 2-vCPU Zen 5 VM (1 MiB L2, 32 MiB L3), word count,
// ackbench -level core, pinned: at 100,000 roots pending (a 3.4 MB table)
// 58-63M msgs/s without the pass against 36-45M with it; at 300,000 (10
// MB) 32M with it against 19-22M without; at 1M 22-25M with it against
// 14M without.
const prefetchAbove = 6 << 20

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

// homes computes the home group and tag of each message of chunk into hs
// (group << 8 | tag) and, for tables past prefetchAbove, prefetches the slot
// each message's probe will most likely end at: the first slot of its home
// group whose tag matches, or else the first empty one.
func (s *Shard) homes(chunk []Msg, hs *[prefetchChunk]uint64) {
	k, ng := s.t.keys, s.t.ng
	for i := range chunk {
		g, lo := bits.Mul64(mix(chunk[i].Root, &k), ng)
		hs[i] = g<<8 | uint64(tagOf(lo))
	}
	if s.prefetch && len(chunk) > 0 {
		prefetchSlots(&s.t.e[0], &s.t.ctrl[0], &hs[0], len(chunk))
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
		if e := &s.t.e[slot]; m.Kind == Ack && e.key != 0 && e.val == m.Val && e.word()&(flagInit|kindMask|flagNear) == flagInit {
			// The ACK that completes a root with the default timeout and
			// no near timer: what step and store would do, without
			// loading a cur.
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
// message is one of the two kinds that make nearly all traffic and touch
// nothing but their slot: an ACK to an existing entry in its home group
// or the next that does not bring its val to 0 (writes one val), and an
// INIT of a new root with the default timeout (TimeoutMs 0 or equal to
// the default), far from due, surely absent and with room in those two
// groups (writes one slot and its tag). It returns the index of the first message it did not
// apply (len(chunk) if none) and the slot where that message's probe
// ended (as find returns it). Its loop calls nothing, so that it keeps
// everything in registers.
//
// hs holds the chunk's home groups and tags, computed (and prefetched) a
// chunk ahead; nil means fastPath hashes each root itself.
func (s *Shard) fastPath(chunk []Msg, hs *[prefetchChunk]uint64, i int) (next int, slot uint64) {
	es, ctrl, k := s.t.e, s.t.ctrl, s.t.keys
	ng := s.t.ng
	acks := uint64(0)
	fastInit := s.fastInit()
	for ; i < len(chunk); i++ {
		m := &chunk[i]
		root := m.Root
		if root == 0 { // invalid; and a probe for 0 would match an empty slot
			s.stats.Acks += acks
			return i, 0
		}
		var g, tag uint64
		if hs != nil {
			h := hs[i&(prefetchChunk-1)]
			g, tag = h>>8, h&0xff
		} else {
			var lo uint64
			g, lo = bits.Mul64(mix(root, &k), ng)
			tag = uint64(tagOf(lo))
		}
		c := ctrl[g]
		base := g * groupSlots
		ml, mh := matchBytes(c.lo, uint8(tag)), matchBytes(c.hi, uint8(tag))&hiTags
		if m.Kind == Ack {
			// The first tag match in the home group, or else in the next
			// (the sentinel follows the last group), checked; anything
			// else (a false match first, the root further on) is left to
			// find. Without branches: x is 8 when the low half has no
			// match, and then the high half's first match is added.
			x := uint64(bits.TrailingZeros64(ml)) >> 3
			j := base + x + uint64(bits.TrailingZeros64(mh))>>3&-(x>>3)
			if ml|mh == 0 || es[j].key != root {
				c2 := ctrl[g+1]
				ml, mh = matchBytes(c2.lo, uint8(tag)), matchBytes(c2.hi, uint8(tag))&hiTags
				x = uint64(bits.TrailingZeros64(ml)) >> 3
				j = base + groupSlots + x + uint64(bits.TrailingZeros64(mh))>>3&-(x>>3)
				if ml|mh == 0 || j >= uint64(len(es)) || es[j].key != root {
					break
				}
			}
			e := &es[j]
			nv := e.val ^ m.Val
			if nv == 0 {
				s.stats.Acks += acks
				return i, j // completes the root, or ends a drain (step)
			}
			e.val = nv
			if p := s.prog; p != nil { // ProgressTimeout: one store per ACK (read here: no register held for it)
				p[j] = s.progNow
			}
			acks++
			continue
		}
		// An INIT of a root that is surely absent (no tag match in its
		// home group and the next, and no entry passed one of them) into
		// the first empty slot of the two.
		if m.Kind != Init || ml|mh != 0 || m.TimeoutMs != 0 && m.TimeoutMs != s.defMs || m.Val == 0 || m.Task > MaxTask ||
			s.t.count >= s.maxPending || !fastInit {
			break
		}
		c2 := ctrl[g+1]
		if matchBytes(c2.lo, uint8(tag))|matchBytes(c2.hi, uint8(tag))&hiTags != 0 || c.hi>>56 != 0 && c2.hi>>56 != 0 {
			break
		}
		el, eh := matchBytes(c.lo, 0), matchBytes(c.hi, 0)&hiTags
		d := uint64(0)
		if el|eh == 0 {
			// The home group is full: the next one's, which counts the
			// entry as passing the home group.
			el, eh = matchBytes(c2.lo, 0), matchBytes(c2.hi, 0)&hiTags
			if el|eh == 0 || c.hi>>56 == overflowSticky {
				break
			}
			d = 1
		}
		x := uint64(bits.TrailingZeros64(el)) >> 3
		pos := x + uint64(bits.TrailingZeros64(eh))>>3&-(x>>3)
		ctrl[g].hi += d << 56
		j := base + d*groupSlots + pos
		(*[groupBytes]byte)(unsafe.Pointer(&ctrl[g+d]))[pos] = uint8(tag)
		es[j] = entry{key: root, val: m.Val, meta: uint64(flagInit|m.Task)<<32 | d<<metaDistShift | uint64(uint32(s.defDeadline))}
		if pr := s.prog; pr != nil {
			pr[j] = s.progNow
		}
		s.t.count++
		s.stats.Inits++
		if invariants.Enabled {
			s.check()
		}
	}
	s.stats.Acks += acks
	if i == len(chunk) {
		return i, 0
	}
	sl, _ := s.t.find(chunk[i].Root)
	return i, uint64(sl)
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
