package offsets

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/xorack/xorack/internal/invariants"
)

// MaxLimit is the largest limit New accepts: 2^30 records, a 128 MiB done
// ring. storm-kafka-client's default maxUncommittedOffsets (10,000,000)
// needs a 2 MiB ring.
const MaxLimit = 1 << 30

// minRingBits is the smallest done ring: one word, so a limit below 64
// still gets whole-word scans.
const minRingBits = 64

// minRuns is the first capacity of the run ring; it doubles as gaps need
// (a partition without gaps never needs more than one run at a time).
const minRuns = 8

// fullCheckBits bounds the debug cost per operation under -tags
// invariants: a ring of at most this many bits is checked whole after every
// operation; a larger one after every ringBits/fullCheckBits operations.
const fullCheckBits = 1 << 12

// Errors that Emit and Done return. ErrFull and ErrStale are flow, not
// faults, and exported for callers to match: a caller checks Full before
// it emits, and a stale Done is the expected fate of a record in flight
// when its partition was revoked or reset. The unexported three are a
// caller's bugs (a correct source never meets them), so nothing matches
// on them; the errors wrapping them name the offending values.
var (
	// ErrFull: the partition holds Limit emitted records that are not yet
	// committable; pause fetching it until Done moves the commit point.
	ErrFull = errors.New("offsets: partition at its limit of uncommitted records")
	// ErrStale: the Mark belongs to an earlier assignment generation (or to
	// another tracker); it was dropped, not applied.
	ErrStale = errors.New("offsets: mark from an earlier assignment generation")
	// errNotAssigned: Emit on a tracker that has no assignment (never
	// assigned, or revoked).
	errNotAssigned = errors.New("offsets: partition not assigned")
	// errOrder: Emit of an offset at or below one already emitted (or
	// below the assignment's start) in this generation.
	errOrder = errors.New("offsets: offset out of order")
	// errDuplicate: Done of a record already done in this generation.
	errDuplicate = errors.New("offsets: record marked done twice")
)

// generations hands out assignment generations, unique in the process, so
// a Mark can never be mistaken for one of another tracker or of an earlier
// assignment of this one. 0 is never handed out: it is the zero Mark's.
var generations atomic.Uint64

// Mark names one emitted record for Done. It is a small value the caller
// keeps with the record while its tree is in flight.
type Mark struct {
	// Offset is the record's offset, as given to Emit.
	Offset int64
	gen    uint64 // the generation Emit ran in
	seq    uint64 // the record's place in its generation's emission order
}

// run is a stretch of records with consecutive offsets: the record emitted
// seq-th in its generation has offset off, the next one off+1, and so on
// until the next run begins.
type run struct {
	seq uint64
	off int64
}

// Tracker tracks one partition's records from emission to commit. See the
// package documentation for its layout, concurrency and invariants.
type Tracker struct {
	// done is the ring of done bits, one per emitted record, indexed by
	// seq & ringMask. Its length and ringMask are immutable after New.
	done     []uint64
	ringMask uint64 // ring bits - 1
	limit    uint64 // immutable after New

	gen       uint64 // current generation; 0 when not assigned
	commitSeq uint64 // seq of the lowest record not done; nextSeq when none
	nextSeq   uint64 // seq the next Emit gets
	next      int64  // lowest offset the next Emit may have
	start     int64  // the current assignment's start
	pending   uint64 // emitted and not done in this generation

	// runs is a ring of runs, oldest first, covering seqs from commitSeq
	// to nextSeq-1; empty when commitSeq == nextSeq. runHead indexes the
	// oldest; len(runs) is a power of two.
	runs    []run
	runHead int
	runLen  int

	committed int64 // highest offset passed to Committed; -1 before any

	scratch []byte // AppendDone's blob, reused

	stats Stats

	debugOps uint64 // operations since New, for the amortised debug check
}

// Stats are a tracker's counters and gauges. Counters run from New; the
// gauges describe the current generation.
type Stats struct {
	Generation uint64 // the current generation; 0 when not assigned
	Limit      int    // the cap on uncommitted records

	Uncommitted int   // gauge: emitted records at or above the committable offset
	Pending     int   // gauge: emitted records not done
	Committable int64 // gauge: the offset a commit may name now (see Committable)
	Committed   int64 // highest offset passed to Committed; -1 before any

	Emitted     uint64 // records emitted
	Done        uint64 // records marked done (completed or dead-lettered)
	Pauses      uint64 // times the partition reached its limit (Full became true)
	Refused     uint64 // Emit calls refused with ErrFull
	Stale       uint64 // Done calls dropped with ErrStale
	Duplicates  uint64 // Done calls refused with errDuplicate
	Dropped     uint64 // records pending when their generation ended (Assign or Revoke)
	LateCommits uint64 // Committed calls at or below the committed offset, ignored
}

// New returns a tracker with no assignment that holds at most limit
// uncommitted records (emitted, at or above the committable offset) per
// generation: storm-kafka-client's maxUncommittedOffsets. It panics if
// limit is not in [1, MaxLimit]: a caller validates its configuration
// first. The tracker keeps a done ring of max(64, limit rounded up to a
// power of two) bits.
func New(limit int) *Tracker {
	if limit < 1 || limit > MaxLimit {
		panic(fmt.Sprintf("offsets: limit %d not in [1, %d]", limit, MaxLimit))
	}
	ringBits := max(minRingBits, 1<<bits.Len64(uint64(limit-1)))
	return &Tracker{
		done:      make([]uint64, ringBits/64),
		ringMask:  uint64(ringBits - 1),
		limit:     uint64(limit),
		committed: -1,
		stats:     Stats{Committed: -1},
	}
}

// Assign begins a new generation at start: the partition is (re)assigned,
// or its consumer seeks, and the next record emitted has an offset of at
// least start. The caller chooses start so that every record below it is
// done or committed (after a rebalance, the greater of the group's
// committed offset and the consumer's position). Every record of the
// previous generation still pending is dropped from tracking (counted in
// Dropped) and its Mark turns stale. The committed offset is kept: a seek
// backwards replays records without moving the commit back. Assign returns
// the new generation.
func (t *Tracker) Assign(start int64) uint64 {
	t.endGeneration()
	t.gen = generations.Add(1)
	t.start, t.next = start, start
	t.afterOp()
	return t.gen
}

// Revoke ends the current generation without starting another: the
// partition was revoked. Pending records are dropped (counted in Dropped),
// their Marks turn stale, Emit fails with errNotAssigned and NextCommit
// offers nothing until the next Assign. Commit what NextCommit offers
// before revoking: offsets done but not committed are forgotten here.
func (t *Tracker) Revoke() {
	t.endGeneration()
	t.gen = 0
	t.afterOp()
}

func (t *Tracker) endGeneration() {
	t.stats.Dropped += t.pending
	// Clear only the words the window touched; the rest are zero.
	for s := t.commitSeq &^ 63; s < t.nextSeq; s += 64 {
		t.done[(s>>6)&(t.ringMask>>6)] = 0
	}
	t.commitSeq, t.nextSeq, t.pending = 0, 0, 0
	t.runHead, t.runLen = 0, 0
}

// Emit records that the record at offset was fetched and is being emitted,
// and returns the Mark to pass to Done when its tree is done. Offsets must
// increase within a generation; gaps between them (compacted or deleted
// records, transaction markers) are allowed and are never waited for.
// Emit fails with ErrFull when the partition is at its limit (nothing is
// recorded: emit the record later), with errNotAssigned outside an
// assignment, and with an error wrapping errOrder for an offset below the
// next one allowed.
func (t *Tracker) Emit(offset int64) (Mark, error) {
	if t.gen == 0 {
		return Mark{}, fmt.Errorf("offsets: emit of offset %d: %w", offset, errNotAssigned)
	}
	if offset < t.next {
		return Mark{}, t.orderError(offset)
	}
	if t.nextSeq-t.commitSeq >= t.limit {
		t.stats.Refused++
		return Mark{}, ErrFull
	}
	if t.runLen == 0 || offset != t.next {
		t.pushRun(run{seq: t.nextSeq, off: offset})
	}
	m := Mark{Offset: offset, gen: t.gen, seq: t.nextSeq}
	t.nextSeq++
	t.next = offset + 1
	t.pending++
	t.stats.Emitted++
	if t.nextSeq-t.commitSeq == t.limit {
		t.stats.Pauses++
	}
	if invariants.Enabled {
		t.afterOp()
	}
	return m, nil
}

func (t *Tracker) orderError(offset int64) error {
	if t.nextSeq == 0 {
		return fmt.Errorf("offsets: emit of offset %d below the assignment's start %d: %w", offset, t.start, errOrder)
	}
	return fmt.Errorf("offsets: emit of offset %d not above the last emitted offset %d: %w", offset, t.next-1, errOrder)
}

// Done records that the record m names is done: its tree completed, or it
// was dead-lettered. Records may be done in any order; the committable
// offset moves past a record only when it and every record emitted before
// it in the generation are done. A Mark of an earlier generation is dropped
// and Done returns ErrStale; a second Done of one record returns an error
// wrapping errDuplicate. Neither changes the tracker beyond a counter.
func (t *Tracker) Done(m Mark) error {
	if m.gen != t.gen || t.gen == 0 {
		t.stats.Stale++
		return ErrStale
	}
	if invariants.Enabled && (m.seq >= t.nextSeq) {
		panic(fmt.Sprintf("offsets: mark of offset %d has seq %d, not emitted (next seq %d)", m.Offset, m.seq, t.nextSeq))
	}
	w := &t.done[(m.seq>>6)&(t.ringMask>>6)]
	bit := uint64(1) << (m.seq & 63)
	if m.seq < t.commitSeq || *w&bit != 0 {
		t.stats.Duplicates++
		return fmt.Errorf("offsets: done of offset %d: %w", m.Offset, errDuplicate)
	}
	*w |= bit
	t.pending--
	t.stats.Done++
	if m.seq == t.commitSeq {
		t.advance()
	}
	if invariants.Enabled {
		t.afterOp()
	}
	return nil
}

// advance moves commitSeq past the run of done records that starts at it,
// clearing their bits (the ring slots are free again), then drops the runs
// it passed. Each record is passed once, a word of 64 at a time, and each
// run is dropped once: O(1) amortised per record.
func (t *Tracker) advance() {
	s, end := t.commitSeq, t.nextSeq
	wordMask := t.ringMask >> 6
	for s < end {
		w := &t.done[(s>>6)&wordMask]
		b := s & 63
		// Bits at and above the window's end are zero, so the run of
		// ones never reaches past end.
		n := uint64(bits.TrailingZeros64(^(*w >> b)))
		*w &^= (uint64(1)<<n - 1) << b // n = 64 only when b = 0: all ones
		s += n
		if b+n < 64 {
			break
		}
	}
	t.commitSeq = s
	if s == end {
		t.runHead, t.runLen = 0, 0
		return
	}
	runMask := len(t.runs) - 1
	for t.runLen > 1 && t.runs[(t.runHead+1)&runMask].seq <= s {
		t.runHead = (t.runHead + 1) & runMask
		t.runLen--
	}
}

func (t *Tracker) pushRun(r run) {
	if t.runLen == len(t.runs) {
		t.growRuns()
	}
	t.runs[(t.runHead+t.runLen)&(len(t.runs)-1)] = r
	t.runLen++
}

// growRuns doubles the run ring. It holds at most limit runs (one per
// uncommitted record), so it stops growing there.
func (t *Tracker) growRuns() {
	runs := make([]run, max(minRuns, 2*len(t.runs)))
	for i := range t.runLen {
		runs[i] = t.runs[(t.runHead+i)&(len(t.runs)-1)]
	}
	t.runs, t.runHead = runs, 0
}

// Committable returns the offset a commit may name now: the offset of the
// lowest record not done in this generation, or, when every record emitted
// is done, the offset after the last one emitted (the assignment's start
// before any). Offsets between emitted records were never fetched and are
// not waited for. Committable never decreases within a generation.
func (t *Tracker) Committable() int64 {
	if t.commitSeq == t.nextSeq {
		return t.next
	}
	r := t.runs[t.runHead]
	return r.off + int64(t.commitSeq-r.seq)
}

// NextCommit returns the offset to commit and true when the partition is
// assigned and Committable is above the committed offset; otherwise the
// committed offset and false. The offset returned is never above the
// offset of a record not yet done.
func (t *Tracker) NextCommit() (int64, bool) {
	if t.gen == 0 {
		return t.committed, false
	}
	if c := t.Committable(); c > t.committed {
		return c, true
	}
	return t.committed, false
}

// Committed records that the broker accepted a commit of offset (or, at
// assignment, that the group's committed offset is offset). The committed
// offset only rises: a late reply to an earlier commit, or a commit at or
// below it, is ignored, counted in LateCommits, and Committed returns
// false.
func (t *Tracker) Committed(offset int64) bool {
	if offset <= t.committed {
		t.stats.LateCommits++
		return false
	}
	t.committed = offset
	return true
}

// NextOffset returns the lowest offset the next Emit may have: the offset
// after the last emitted, or the assignment's start before any.
func (t *Tracker) NextOffset() int64 { return t.next }

// Full reports whether the partition is at its limit of uncommitted
// records: fetching it should pause until Done moves the commit point.
func (t *Tracker) Full() bool { return t.nextSeq-t.commitSeq >= t.limit }

// Uncommitted returns the number of emitted records at or above the
// committable offset: records not done, and done records above one that is
// not. Full is Uncommitted() >= Limit().
func (t *Tracker) Uncommitted() int { return int(t.nextSeq - t.commitSeq) }

// Pending returns the number of records emitted in this generation and not
// yet done.
func (t *Tracker) Pending() int { return int(t.pending) }

// Limit returns the cap on uncommitted records given to New.
func (t *Tracker) Limit() int { return int(t.limit) }

// Generation returns the current generation, 0 when not assigned.
func (t *Tracker) Generation() uint64 { return t.gen }

// Stats returns the tracker's counters and gauges.
func (t *Tracker) Stats() Stats {
	s := t.stats
	s.Generation = t.gen
	s.Limit = int(t.limit)
	s.Uncommitted = t.Uncommitted()
	s.Pending = t.Pending()
	s.Committable = t.Committable()
	s.Committed = t.committed
	return s
}

// RingBytes returns the memory of the done ring: one bit per record up to
// the limit rounded up to a power of two (at least 64). The run ring adds
// 16 bytes per gap between uncommitted records, at most 16 per record.
func (t *Tracker) RingBytes() int { return 8 * len(t.done) }
