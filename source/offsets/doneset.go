package offsets

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"sort"
)

// The done set: the offsets above the committable offset that need no
// processing, carried in a commit's metadata so that a restart replays only
// what did not finish (docs/semantics.md, "Sources", rule 18). An offset
// above the floor is in the set when it is not a record emitted and not
// yet done: records done, and offsets between fetched records that were
// never fetched (a gap: compaction, deletion, transaction markers), which
// a replay does not fetch either. The set covers [floor, floor+span); the
// floor itself is the lowest record not done, never in the set.
//
// Text layout (Kafka's commit metadata is a string, and a broker may
// re-encode one that is not UTF-8, so the bytes travel as base64):
//
//	"xk:" base64url, no padding, of the blob below
//
// Blob layout, every integer an unsigned LEB128 varint (encoding/binary's
// Uvarint) unless given a width:
//
//	+---------+------+-------------+------------+----------------+------------+
//	| version | kind | floor       | span       | body           | crc32c     |
//	| 1 byte  | 1 B  | uvarint     | uvarint    | (kind)         | 4 bytes LE |
//	+---------+------+-------------+------------+----------------+------------+
//	  offVersion offKind offFloor
//
//	version  doneVersion (1). Another version is ignored, not guessed at.
//	kind     doneKindRuns (1) or doneKindBits (2).
//	floor    the committed offset the set is relative to; a reader drops
//	         a set whose floor is not the offset committed with it.
//	span     offsets covered, at least 1: floor .. floor+span-1.
//	body     runs: pairs (pending, done) of uvarints, each at least 1,
//	         alternating from the floor: pending offsets (to replay), then
//	         done offsets; the pairs sum to span exactly.
//	         bits: ceil(span/8) bytes, bit i (byte i/8, bit i%8, least
//	         significant first) set when floor+i is done; bit 0 is clear
//	         (the floor is not done) and bits at or above span are clear.
//	crc32c   Castagnoli CRC of every byte before it: a foreign string that
//	         happens to start "xk:" and decode is still refused.
//
// The encoder writes whichever body is smaller (run-length for a few long
// stretches, bits for many short ones), within a byte budget for the whole
// text. When the whole set does not fit, it covers the longest prefix of
// the span that fits, and the offsets past it count as not done: they are
// replayed, as they would be with the floor alone. Nothing else is lost.
const (
	donePrefix   = "xk:"
	doneVersion  = 1
	doneKindRuns = 1
	doneKindBits = 2

	offVersion = 0
	offKind    = 1
	offFloor   = 2

	crcLen = 4
	// maxUvarint is the longest uvarint of a uint64.
	maxUvarint = binary.MaxVarintLen64
	// MaxDoneText is the longest metadata ParseDone reads: 64 KiB, sixteen
	// times Kafka's default offset.metadata.max.bytes. It bounds what a
	// decode allocates (at most four ranges per blob byte).
	MaxDoneText = 64 << 10
	// MinDoneBudget is the smallest budget that holds a set whatever its
	// floor: the prefix and the base64 of a blob of the longest header
	// (two bytes, two 10-byte uvarints), one body byte and the CRC.
	MinDoneBudget = len(donePrefix) + (2+2*maxUvarint+1+crcLen+2)/3*4
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Errors ParseDone returns, wrapped with the offending value.
var (
	// ErrForeign: the metadata is not a done set (another client's
	// metadata, or an older xorack's): ignored.
	ErrForeign = errors.New("offsets: metadata is not a done set")
	// ErrMalformed: the metadata claims to be a done set and is not a
	// valid one (truncated, corrupted, another version): ignored.
	ErrMalformed = errors.New("offsets: malformed done set")
)

// doneSink receives the window as alternating stretches of offsets, from
// the floor up: pending first. It sizes both bodies within a budget, or,
// when writing, writes the one chosen. It is a concrete type so the walk
// allocates nothing.
type doneSink struct {
	budget int // body bytes allowed

	// the stretch being merged
	curDone bool
	curLen  uint64
	pend    uint64 // pending length of the pair being built (flushed when done ends)

	span      uint64 // offsets in the pairs flushed: the whole set's span
	firstPend uint64 // the first pair's pending length: the offsets before the first done one

	runsBytes int    // runs body bytes of the pairs within budget
	runsCover uint64 // span of the pairs within budget
	runsFull  bool   // every pair so far fits
	bitsLimit uint64 // the span a bitset body within budget covers
	stop      bool   // nothing more can be sized or written: the walk ends

	// writing
	write bool
	kind  byte
	cover uint64 // span to write
	out   []byte // body being written (bits: preallocated, zeroed)
}

func (k *doneSink) add(done bool, n uint64) {
	if n == 0 {
		return
	}
	if done == k.curDone || k.curLen == 0 {
		k.curDone = done
		k.curLen += n
		return
	}
	k.stretchEnd()
	k.curDone, k.curLen = done, n
}

// stretchEnd closes the current stretch.
func (k *doneSink) stretchEnd() {
	if k.curLen == 0 {
		return
	}
	if !k.curDone {
		k.pend = k.curLen
	} else {
		k.pair(k.pend, k.curLen)
		k.pend = 0
	}
	k.curLen = 0
}

// finish closes the walk: a trailing pending stretch is not part of the
// set.
func (k *doneSink) finish() {
	if k.curLen != 0 && k.curDone {
		k.stretchEnd()
	}
	k.curLen = 0
}

func (k *doneSink) pair(p, d uint64) {
	start := k.span
	if start == 0 {
		k.firstPend = p
	}
	k.span += p + d
	if !k.write {
		if k.runsFull {
			n := uvarintLen(p) + uvarintLen(d)
			if k.runsBytes+n <= k.budget {
				k.runsBytes += n
				k.runsCover = k.span
			} else {
				k.runsFull = false
			}
		}
		k.stop = !k.runsFull && k.span > k.bitsLimit
		return
	}
	if start >= k.cover {
		return
	}
	k.stop = k.span >= k.cover
	if k.kind == doneKindRuns {
		k.out = binary.AppendUvarint(k.out, p)
		k.out = binary.AppendUvarint(k.out, d)
		return
	}
	lo, hi := start+p, min(k.span, k.cover)
	if lo < hi {
		setBits(k.out, lo, hi)
	}
}

// setBits sets bits [lo, hi) of b, a byte at a time in the middle.
func setBits(b []byte, lo, hi uint64) {
	for lo < hi && lo&7 != 0 {
		b[lo>>3] |= 1 << (lo & 7)
		lo++
	}
	for lo+8 <= hi {
		b[lo>>3] = 0xff
		lo += 8
	}
	for lo < hi {
		b[lo>>3] |= 1 << (lo & 7)
		lo++
	}
}

func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// walk feeds the window to k in offset order: stretches of pending and
// done records, and the gaps between runs of offsets as done. A word of
// done bits at a time.
func (t *Tracker) walk(k *doneSink) {
	s, end := t.commitSeq, t.nextSeq
	if s == end {
		return
	}
	wordMask := t.ringMask >> 6
	runMask := len(t.runs) - 1
	ri := 0
	r := t.runs[t.runHead]
	for s < end {
		runEnd := end
		if ri+1 < t.runLen {
			runEnd = t.runs[(t.runHead+ri+1)&runMask].seq
		}
		for s < runEnd {
			w := t.done[(s>>6)&wordMask] >> (s & 63)
			done := w&1 != 0
			if done {
				w = ^w
			}
			n := uint64(bits.TrailingZeros64(w)) // ones from s in this word (all 64 - s&63 when the rest is ones)
			n = min(n, 64-(s&63), runEnd-s)
			k.add(done, n)
			if k.stop {
				return
			}
			s += n
		}
		if s == end {
			break
		}
		last := r.off + int64(s-1-r.seq)
		ri++
		r = t.runs[(t.runHead+ri)&runMask]
		k.add(true, uint64(r.off-last-1))
		if k.stop {
			return
		}
	}
	k.finish()
}

// AppendDone appends to dst the metadata text of the done set above the
// committable offset (the layout above), at most budget bytes of it, and
// reports whether the whole set fit. An empty set, or a budget too small
// for any of it, appends nothing: the floor alone, which a reader takes
// as an empty set. It allocates nothing once the tracker's scratch blob
// and dst have grown to the size needed. Walks the window a word of done
// bits at a time, twice (to size, then to write).
func (t *Tracker) AppendDone(dst []byte, budget int) ([]byte, bool) {
	if t.gen == 0 || t.commitSeq == t.nextSeq {
		return dst, true
	}
	floor := t.Committable()
	maxBlob := (budget - len(donePrefix)) * 3 / 4
	// The span is at most the offsets from the floor to the last emitted:
	// its uvarint bounds the header's.
	header := 2 + uvarintLen(uint64(floor)) + uvarintLen(uint64(t.next-floor))
	body := maxBlob - header - crcLen
	if body < 1 {
		return dst, false
	}
	// Size both bodies within the budget, stopping once neither can
	// take more: the cost is bounded by what fits, not by the window.
	k := doneSink{runsFull: true, budget: body, bitsLimit: 8 * uint64(body)}
	t.walk(&k)
	if k.span == 0 {
		return dst, true
	}
	bitsCover := min(k.span, k.bitsLimit)
	w := doneSink{write: true}
	switch {
	case k.runsFull && bitsCover == k.span:
		w.kind, w.cover = doneKindBits, bitsCover
		if k.runsBytes <= int((k.span+7)/8) {
			w.kind = doneKindRuns
		}
	case k.runsCover >= bitsCover:
		w.kind, w.cover = doneKindRuns, k.runsCover
	default:
		w.kind, w.cover = doneKindBits, bitsCover
	}
	complete := !k.stop && w.cover == k.span
	if w.cover <= k.firstPend {
		return dst, false // not one done offset fits
	}
	b := t.scratch[:0]
	b = append(b, doneVersion, w.kind)
	b = binary.AppendUvarint(b, uint64(floor))
	b = binary.AppendUvarint(b, w.cover)
	if w.kind == doneKindRuns {
		w.out = b
	} else {
		n := int((w.cover + 7) / 8)
		b = append(b, make([]byte, n)...) // no allocation once scratch has the room
		w.out = b[len(b)-n:]
		clear(w.out)
	}
	t.walk(&w)
	if w.kind == doneKindRuns {
		b = w.out
	}
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
	t.scratch = b
	dst = append(dst, donePrefix...)
	dst = base64.RawURLEncoding.AppendEncode(dst, b)
	return dst, complete
}

// Range is a half-open range of offsets, [Lo, Hi).
type Range struct{ Lo, Hi int64 }

// DoneSet is a decoded done set: the offsets in Ranges (sorted, disjoint,
// not adjacent) are done, within [Floor, Floor+Span). Offsets at or above
// Floor+Span are not known to be done. The zero DoneSet is empty.
type DoneSet struct {
	Floor  int64
	Span   int64
	Ranges []Range
}

// Contains reports whether offset is in the set.
func (d *DoneSet) Contains(offset int64) bool {
	i := sort.Search(len(d.Ranges), func(i int) bool { return d.Ranges[i].Hi > offset })
	return i < len(d.Ranges) && d.Ranges[i].Lo <= offset
}

// Len returns the number of offsets in the set.
func (d *DoneSet) Len() int64 {
	var n int64
	for _, r := range d.Ranges {
		n += r.Hi - r.Lo
	}
	return n
}

// ParseDone decodes metadata text written by AppendDone. The empty string
// is the empty set. Text that is not a done set fails with an error
// wrapping ErrForeign; a done set that does not check (length, version,
// kind, sums, CRC) with one wrapping ErrMalformed. It never panics and
// allocates at most in proportion to the text, which it refuses past
// MaxDoneText.
func ParseDone(meta string) (DoneSet, error) {
	if meta == "" {
		return DoneSet{}, nil
	}
	if len(meta) < len(donePrefix) || meta[:len(donePrefix)] != donePrefix {
		return DoneSet{}, fmt.Errorf("offsets: metadata %.32q: %w", meta, ErrForeign)
	}
	if len(meta) > MaxDoneText {
		return DoneSet{}, fmt.Errorf("offsets: done set of %d bytes exceeds limit %d: %w", len(meta), MaxDoneText, ErrMalformed)
	}
	b, err := base64.RawURLEncoding.DecodeString(meta[len(donePrefix):])
	if err != nil {
		return DoneSet{}, fmt.Errorf("offsets: done set %.32q: %v: %w", meta, err, ErrMalformed)
	}
	return decodeBlob(b)
}

func decodeBlob(b []byte) (DoneSet, error) {
	bad := func(what string, v any) (DoneSet, error) {
		return DoneSet{}, fmt.Errorf("offsets: done set: %s %v: %w", what, v, ErrMalformed)
	}
	if len(b) < offFloor+2+crcLen {
		return bad("blob length", len(b))
	}
	sum := binary.LittleEndian.Uint32(b[len(b)-crcLen:])
	b = b[:len(b)-crcLen]
	if got := crc32.Checksum(b, crcTable); got != sum {
		return bad("crc32c", fmt.Sprintf("%08x, want %08x", got, sum))
	}
	if b[offVersion] != doneVersion {
		return bad("version", b[offVersion])
	}
	kind := b[offKind]
	rest := b[offFloor:]
	floor, n := binary.Uvarint(rest)
	if n <= 0 || floor > math.MaxInt64 {
		return bad("floor", floor)
	}
	rest = rest[n:]
	span, n := binary.Uvarint(rest)
	if n <= 0 || span == 0 || span > math.MaxInt64-floor {
		return bad("span", span)
	}
	rest = rest[n:]
	d := DoneSet{Floor: int64(floor), Span: int64(span)}
	switch kind {
	case doneKindRuns:
		var at uint64
		for len(rest) > 0 {
			p, n1 := binary.Uvarint(rest)
			if n1 <= 0 || p == 0 || p > span-at {
				return bad("pending run", p)
			}
			rest = rest[n1:]
			q, n2 := binary.Uvarint(rest)
			if n2 <= 0 || q == 0 || q > span-at-p {
				return bad("done run", q)
			}
			rest = rest[n2:]
			lo := int64(floor + at + p)
			d.Ranges = append(d.Ranges, Range{lo, lo + int64(q)})
			at += p + q
		}
		if at != span {
			return bad("runs sum", fmt.Sprintf("%d, span %d", at, span))
		}
	case doneKindBits:
		if uint64(len(rest)) != (span+7)/8 {
			return bad("bitset length", fmt.Sprintf("%d bytes for span %d", len(rest), span))
		}
		if rest[0]&1 != 0 {
			return bad("bitset", "with the floor done")
		}
		if r := span & 7; r != 0 && rest[len(rest)-1]>>r != 0 {
			return bad("bitset", "with bits past the span")
		}
		var lo int64 = -1
		for i, c := range rest {
			if c == 0 && lo < 0 || c == 0xff && lo >= 0 {
				continue
			}
			for j := range 8 {
				off := int64(floor) + int64(i)*8 + int64(j)
				if c>>j&1 != 0 {
					if lo < 0 {
						lo = off
					}
				} else if lo >= 0 {
					d.Ranges = append(d.Ranges, Range{lo, off})
					lo = -1
				}
			}
		}
		if lo >= 0 {
			d.Ranges = append(d.Ranges, Range{lo, int64(floor + span)})
		}
		if len(d.Ranges) == 0 {
			return bad("bitset", "with no offset done")
		}
	default:
		return bad("kind", kind)
	}
	return d, nil
}
