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
// lines ahead for the portable loop (fastPath); the assembly loop looks
// ahead inside its own loop at every size (and further ahead past
// farAbove). Below it
// the table stays in the last-level cache, where the core's own
// out-of-order execution overlaps the misses of neighbouring messages,
// and the prefetch pass (hashing a chunk ahead, reading each control
// word: about 70 instructions a message under callgrind) costs more than
// it saves. Measured with the assembly loop before it looked ahead itself,
// on a 2-vCPU AMD EPYC VM (512 KiB L2 a core, 32 MiB L3), word count,
// ackbench -level core, pinned: at 100,000 roots pending (a 3.4 MB table)
// 58-63M msgs/s without the pass against 36-45M with it; at 300,000
// (10 MB) 32M with it against 19-22M without; at 1M 22-25M with it
// against 14M without.
const prefetchAbove = 6 << 20

// farAbove is the table size past which the assembly loop looks further
// ahead (ackRunFar in place of ackRun: ackrun_far_amd64.s), for a table
// whose lines come from memory more than from the last-level cache.
// Measured with ackbench -level core, pinned, the two builds alternated
// on a 2-vCPU AMD VM (1 MiB L2 a core): at 1,000,000 roots pending (a
// 34 MB table) 1.05-1.08x on the word count and 1.06-1.09x on
// tree8x8, chain16 and diamond8; at 300,000 (10 MB) 1.14x on the word
// count but 0.84-0.97x on the three trees, whose ACKs follow their INIT
// closely enough to find its lines cached.
const farAbove = 24 << 20

// Apply applies msgs in order and appends the outcomes they cause to out,
// which it returns. Each message causes at most one outcome, so an out with
// spare capacity len(msgs) is never grown, and once warm Apply allocates
// nothing (it makes the near wheel at the first root that needs a near
// timer, and grows it in bursts of them).
// Malformed messages are answered with Refused{invalid} and counted.
func (s *Shard) Apply(msgs []Msg, out []Outcome) []Outcome {
	s.setNow()
	if haveAckRun && s.prog == nil { // ackRun keeps no progress
		return s.applyRun(msgs, out)
	}
	if !s.prefetch {
		return s.applyChunk(msgs, nil, out)
	}
	// Software pipeline: hash chunk k+1 and prefetch its lines, then apply
	// chunk k, whose lines were prefetched one chunk earlier. Chunks start
	// small and double up to prefetchChunk, so that the first messages of a
	// call, which nothing prefetched ahead, are few.
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
		out = s.applyChunk(chunk, &s.hs[cur], out)
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
		i, slot, out = s.fastPath(chunk, hs, i, out)
		if i == len(chunk) {
			return out
		}
		out = s.slow(&chunk[i], int(slot), out)
	}
}

// fastInit reports whether INITs of new roots may take the fast paths: the
// default deadline is far (no near timer needed) and no FAIL is held in
// the filter (every INIT would have to be checked).
func (s *Shard) fastInit() bool { return s.defDeadline >= s.limit && !s.fails.active() }

// fastPath is the portable hot loop, for CPUs without ackRun (see
// applyRun and ackrun_amd64.s). It applies chunk[i:] for as long as each
// message is one of the kinds that make nearly all traffic and touch
// nothing but their slot: an ACK to an existing entry that does not bring
// its val to 0 (writes one val), one that completes a root with the
// default timing and no near timer (appends Completed to out, empties the
// slot), and an INIT of a new root with the default timeout (TimeoutMs 0
// or equal to the default), far from due, into the first empty slot from
// its home group on (writes one slot, its tag and the overflow counts of
// the groups it passed). It probes as find does (lookup), group by group
// while the overflow count says entries passed, matching the tag in both
// halves of a control word at once (SWAR). It returns the index of the
// first message it did not apply (len(chunk) if none), the slot where that
// message's probe ended (as find returns it) and out. Its common paths
// call nothing, so that it keeps everything in registers.
//
// hs holds the chunk's home groups and tags, computed (and prefetched) a
// chunk ahead; nil means fastPath hashes each root itself.
func (s *Shard) fastPath(chunk []Msg, hs *[prefetchChunk]uint64, i int, out []Outcome) (next int, slot uint64, _ []Outcome) {
	t := &s.t
	es, ctrl := t.e, t.ctrl[:t.ng]
	ng := t.ng
	acks := uint64(0)
	fastInit := s.fastInit()
loop:
	for ; i < len(chunk); i++ {
		m := &chunk[i]
		root := m.Root
		if root == 0 { // invalid; and a probe for 0 would match an empty slot
			s.stats.Acks += acks
			return i, 0, out
		}
		var g, tag uint64
		if hs != nil {
			h := hs[i&(prefetchChunk-1)]
			g, tag = h>>8, h&0xff
		} else {
			var lo uint64
			g, lo = bits.Mul64(mix(root, &t.keys), ng)
			tag = uint64(tagOf(lo))
		}
		b := lowBits * tag
		c := &ctrl[g]
		mm := tagMask(c, b)
		if m.Kind == Ack {
			// The first candidate of the home group, checked; anything
			// else (a false match first, the root further on) is left to
			// lookup. With no candidate the check reads slot 14, which
			// then cannot hold root (its tag would have matched).
			j := g*groupSlots + uint64(bits.TrailingZeros64(mm|1<<(groupSlots-1)))
			if es[j].key != root {
				var found bool
				if j, found = t.lookup(root, g, b); !found {
					break // an ACK without an entry: step
				}
			}
			e := &es[j]
			nv := e.val ^ m.Val
			if nv == 0 {
				if !e.word().completesPlain() {
					s.stats.Acks += acks
					return i, j, out // ends a drain, or completes a root of another timing: step
				}
				// The ACK that completes a root with the default timeout
				// and no near timer: what step and store would do,
				// without loading a cur.
				start := s.expand(uint32(e.meta)) - s.defTicks
				out = append(out, Outcome{Root: root, Task: e.word().spoutTask(), Kind: Completed, Latency: s.latency(start)})
				s.removeSlot(int(j))
				s.stats.Completed++
				acks++
				if invariants.Enabled {
					s.check()
				}
				continue
			}
			e.val = nv
			if p := s.prog; p != nil { // ProgressTimeout: one store per ACK (read here: no register held for it)
				p[j] = s.progNow
			}
			acks++
			continue
		}
		// An INIT of a new root into the first empty slot from its home
		// group on.
		if m.Kind != Init || m.TimeoutMs != 0 && m.TimeoutMs != s.defMs || m.Val == 0 || m.Task > MaxTask ||
			s.t.count >= s.maxPending || !fastInit {
			break
		}
		if mm != 0 || c.hi>>56 != 0 { // not surely absent: look further
			if _, found := t.lookup(root, g, b); found {
				break // an INIT to an entry an early ACK made: step
			}
		}
		// Most often one of the home group's first eight slots is empty;
		// else firstEmpty reads on.
		z, pos := g, uint64(0)
		if el := zeroBytes(c.lo); el != 0 {
			pos = uint64(bits.TrailingZeros64(el)) >> 3
		} else {
			z, pos = t.firstEmpty(g)
		}
		d := z - g
		if z < g { // round the end
			d += ng
		}
		if d >= distSat {
			break // a saturated distance: step
		}
		for h := g; h != z; { // count the entry into the groups it passed
			if c := &ctrl[h]; c.hi>>56 != overflowSticky {
				c.hi += 1 << 56
			}
			if h++; h == ng {
				h = 0
			}
		}
		j := z*groupSlots + pos
		(*[groupBytes]byte)(unsafe.Pointer(&ctrl[z]))[pos] = uint8(tag)
		es[j] = entry{key: root, val: m.Val, meta: uint64(initWord(m.Task))<<32 | d<<metaDistShift | uint64(uint32(s.defDeadline))}
		if p := s.prog; p != nil {
			p[j] = s.progNow
		}
		s.t.count++
		s.stats.Inits++
		if invariants.Enabled {
			s.check()
		}
		continue loop
	}
	s.stats.Acks += acks
	if i == len(chunk) {
		return i, 0, out
	}
	sl, _ := s.t.find(chunk[i].Root)
	return i, uint64(sl), out
}

// slow applies m, whose probe ended at slot, through step: everything
// fastPath does not apply.
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
