// Package offsets decides which offset a replayable source may commit: per
// partition, records are marked emitted in fetch order and done
// (completed or dead-lettered) in any order, and the committable offset is
// the offset of the lowest record not yet done, or the offset after the
// last record emitted when all are done. A crash then replays from the
// commit and nothing below it is lost (docs/semantics.md, "Sources").
//
// A Tracker serves one partition (a Kafka topic-partition; for a source
// without offsets, any increasing sequence). Emit and Done cost O(1)
// amortised, with no allocation after a short warm-up, and memory is
// bounded by a cap on uncommitted records, storm-kafka-client's
// maxUncommittedOffsets: when it is reached, Full reports true and the
// caller pauses fetching that partition.
//
// What it guards against, each a bug report of Storm's Kafka spout or
// franz-go:
//   - one record not done stops the commit at it, and only at it; records
//     after it go on being emitted and done up to the cap (STORM-2343,
//     STORM-2549: a failing record must not stop the partition);
//   - contiguity is over the records actually fetched: offsets missing
//     between them (compaction, deletion, transaction markers) are never
//     waited for (STORM-2505);
//   - a Done for an earlier assignment of the partition (before a
//     revocation, a rebalance or a seek) is dropped, not applied
//     (STORM-2104);
//   - the committed offset never moves back: a late reply to an earlier
//     commit is ignored (franz-go#689).
//
// # Layout
//
// Records are numbered in emission order within a generation (seq 0, 1,
// 2, ...). The done ring has one bit per record, at seq mod ring bits; the
// ring has the cap rounded up to a power of two bits (64 at least), so a
// cap of 10,000 records is a 2 KiB ring:
//
//	seq      commitSeq                                     nextSeq
//	            v                                             v
//	done     [ 0 | 1 | 1 | 0 | 1 | 0 | 0 | 1 | 1 | 1 | 0 | ... ]   bit seq & ringMask
//	            ^ the lowest record not done; everything before it was
//	              done and its bits cleared when commitSeq passed them
//
// Because the bitmap is indexed by seq rather than by offset, a gap of a
// million offsets between two fetched records costs no bits, and the cap
// counts records, as storm-kafka-client's does. Offsets are recovered from
// a ring of runs: a run {seq, off} says the record emitted seq-th has
// offset off and the records after it have off+1, off+2, ... until the
// next run. A partition without gaps has one run at a time; each gap
// between uncommitted records adds one (16 bytes):
//
//	runs     [ {seq 0, off 5000} | {seq 3, off 5010} | {seq 9, off 7000} ]
//	            oldest: holds commitSeq   ^ offsets 5003..5009 are a gap
//
//	Committable = runs[oldest].off + (commitSeq - runs[oldest].seq)
//	              (or the offset after the last emitted when commitSeq == nextSeq)
//
// Done sets the record's bit; when the record is the one at commitSeq,
// advance moves commitSeq over the ones that follow it, a word at a time
// with one TrailingZeros64 per word, clearing them as it goes (the slots
// are free for later records), then drops the runs it passed. Every record
// is passed once and every run dropped once, so marks cost O(1) amortised,
// against O(log n) per insertion and a walk per commit for sorted sets of
// emitted and acked offsets (storm-kafka-client's OffsetManager; see
// BenchmarkOffsets).
//
// # The done set
//
// AppendDone encodes the offsets above the committable offset that need
// no processing (records done, and the gaps between fetched records) as
// text for a commit's metadata, within a byte budget: run-length or
// bitset, whichever is smaller, versioned and checksummed (the byte
// layout is in doneset.go and docs/semantics.md, rule 18). It walks the
// done ring a word at a time and stops once the budget is spent, writing
// into a scratch blob the tracker keeps: no allocation per offset, none at
// all once the buffers have grown. ParseDone reads it back into ranges
// (at most four per byte of text), refusing foreign and malformed text
// with ErrForeign or ErrMalformed; a spout skips the records in it on its
// next assignment instead of replaying them.
//
// A Mark carries the record's offset, its seq and the generation it was
// emitted in. Generations come from one process-wide counter, so a Mark is
// never current for another tracker or for a later assignment of its own.
//
// # Concurrency
//
// A Tracker has a single owner: every method, including Stats and the
// other read-only ones, must be called from the goroutine that owns it (in
// a spout, the goroutine that fetches and emits, which also receives the
// acker's outcomes and issues commits), or under the owner's lock. All
// fields are written by the owner only; the ring's size and the limit are
// immutable after New. The only shared state is the generation counter,
// taken atomically once per Assign. A caller that commits from another
// goroutine takes the offset from NextCommit on the owner, and reports the
// reply back to the owner, which calls Committed.
//
// # Invariants
//
// Checked by (*Tracker).check, which tests call directly and which runs
// after every operation when built with -tags invariants (amortised on
// rings of more than 4096 bits):
//   - commitSeq <= nextSeq and nextSeq - commitSeq <= limit (the cap);
//   - done bits are set only for seqs in (commitSeq, nextSeq): never at
//     commitSeq (that record is not done) and never outside the window,
//     and the window's zeros are exactly the records pending;
//   - the runs are present exactly when the window is not empty, the
//     oldest holds commitSeq, each later run starts where the offset does
//     not follow the previous record's, and the last record's offset is
//     the last emitted;
//   - an unassigned tracker holds no records.
//
// From these: Committable never exceeds the offset of a record not done
// (every record of a lower seq is done, and offsets increase with seq),
// and never decreases within a generation (commitSeq and the runs only
// move forward). The committed offset only rises, across generations too.
package offsets
