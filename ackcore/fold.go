package ackcore

import "slices"

// Folding: a chunk of a batch is grouped by root in a small scratch hash
// table, then each root's messages are applied in their original order to
// one loaded entry (Shard.step), with one table probe and one store per
// root. The result is exactly that of applying the messages one by one,
// including a root that completes and is recreated by a later message of
// the same chunk; only the order of outcomes of different roots within a
// chunk may differ.
//
// Messages of different roots interact through one thing only: the bound.
// Whether a message that needs a new entry finds room depends on how many
// entries the messages before it created and removed, and grouping
// changes that order. So a chunk is folded only when it cannot reach the
// bound (each message creates at most one entry: pending + chunk length <=
// MaxPending), nor the owner's orphan share (its orphans + chunk length
// <= OrphanShare: a chunk has one owner, owners.go), and no FAIL is held in the overflow filter (whose false
// positives depend on the order of different roots); otherwise it is
// applied one message at a time, like FoldOff.

const (
	// foldChunk is the most messages grouped at once. 256 keeps the scratch
	// (5 KiB) in L1 beside the chunk itself (8 KiB of messages).
	foldChunk = 256
	// foldSlots is the scratch table size: twice the chunk, a power of two,
	// so linear probing there stays short.
	foldSlots = 2 * foldChunk
)

// deferredOrphan is an orphan a folded chunk made: its root and the index
// of the message that made it.
type deferredOrphan struct {
	root uint64
	idx  int16
}

type foldScratch struct {
	orphans []deferredOrphan  // made in this chunk, queued after it (queueDeferred); at most foldChunk
	keys    [foldSlots]uint64 // root per scratch slot; 0 = free
	head    [foldSlots]int16  // first message of the root's group
	tail    [foldSlots]int16  // last message of the root's group
	next    [foldChunk]int16  // next message of the same root, -1 at the end
	order   [foldChunk]int16  // scratch slots in first-seen order
}

func (s *Shard) applyFolded(msgs []Msg, out []Outcome) []Outcome {
	fs := s.fs
	var c cur
	for len(msgs) > 0 {
		chunk := msgs
		if len(chunk) > foldChunk {
			chunk = chunk[:foldChunk]
		}
		msgs = msgs[len(chunk):]
		if !s.foldable(len(chunk)) {
			out = s.applyOneByOne(chunk, out)
			continue
		}
		if s.prefetch {
			for i := 0; i < len(chunk); i += prefetchChunk {
				s.homes(chunk[i:min(i+prefetchChunk, len(chunk))], &s.hs[0])
			}
		}
		n := 0
		for i := range chunk {
			r := chunk[i].Root
			fs.next[i] = -1
			if r == 0 { // invalid: refuse in place, it has no group
				c = cur{}
				out = s.step(&c, &chunk[i], out)
				continue
			}
			h := mix(r, &s.t.keys) >> (64 - 9) // 9 bits: foldSlots = 512; keyed, so structured ids scatter here too
			for fs.keys[h] != 0 && fs.keys[h] != r {
				h = (h + 1) & (foldSlots - 1)
			}
			if fs.keys[h] == 0 {
				fs.keys[h] = r
				fs.head[h] = int16(i)
				fs.tail[h] = int16(i)
				fs.order[n] = int16(h)
				n++
			} else {
				fs.next[fs.tail[h]] = int16(i)
				fs.tail[h] = int16(i)
			}
		}
		s.deferOrphans = true
		for _, h := range fs.order[:n] {
			s.load(&c, fs.keys[h])
			for j := fs.head[h]; j >= 0; j = fs.next[j] {
				s.msgIdx = int(j)
				out = s.step(&c, &chunk[j], out)
			}
			s.store(&c)
			fs.keys[h] = 0
		}
		s.deferOrphans = false
		s.queueDeferred()
	}
	return out
}

// queueDeferred queues the orphans a folded chunk made in the order of
// the messages that made them, as applying them one by one would have
// (groups are stored in the order their roots first appear, which is
// another), and gives their entries their tags.
func (s *Shard) queueDeferred() {
	d := s.fs.orphans
	if len(d) == 0 {
		return
	}
	slices.SortFunc(d, func(a, b deferredOrphan) int { return int(a.idx) - int(b.idx) })
	for _, o := range d {
		tag := s.queueOrphan(o.root)
		slot, _ := s.t.find(o.root)
		e := &s.t.e[slot]
		e.meta = e.meta&^(uint64(s.orphanQ.mask)<<32) | uint64(tag)<<32
	}
	s.fs.orphans = d[:0]
}

// foldable reports whether a chunk of n messages may be folded: see the
// top of this file.
func (s *Shard) foldable(n int) bool {
	return s.t.count+n <= s.maxPending && !s.fails.active() && int(s.ownerOrphans[s.owner])+n <= s.orphanShare
}

// applyOneByOne applies chunk in order, as FoldOff does.
func (s *Shard) applyOneByOne(chunk []Msg, out []Outcome) []Outcome {
	if haveAckRun && s.prog == nil { // ackRun keeps no progress
		return s.applyRun(chunk, nil, out)
	}
	return s.applyChunk(chunk, nil, out)
}
