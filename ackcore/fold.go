package ackcore

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
// MaxPending) and no FAIL is held in the overflow filter (whose false
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

type foldScratch struct {
	keys  [foldSlots]uint64 // root per scratch slot; 0 = free
	head  [foldSlots]int16  // first message of the root's group
	tail  [foldSlots]int16  // last message of the root's group
	next  [foldChunk]int16  // next message of the same root, -1 at the end
	order [foldChunk]int16  // scratch slots in first-seen order
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
		for _, h := range fs.order[:n] {
			s.load(&c, fs.keys[h])
			for j := fs.head[h]; j >= 0; j = fs.next[j] {
				out = s.step(&c, &chunk[j], out)
			}
			s.store(&c)
			fs.keys[h] = 0
		}
	}
	return out
}

// foldable reports whether a chunk of n messages may be folded: see the
// top of this file.
func (s *Shard) foldable(n int) bool {
	return s.t.count+n <= s.maxPending && !s.fails.active()
}

// applyOneByOne applies chunk in order, as FoldOff does.
func (s *Shard) applyOneByOne(chunk []Msg, out []Outcome) []Outcome {
	if haveAckRun {
		return s.applyRun(chunk, nil, out)
	}
	return s.applyChunk(chunk, nil, out)
}
