// Package ackcore is xorack's acker for one shard: Apache Storm's XOR ack
// tracking behind a batch API, with the rules of the project's contract,
// docs/semantics.md.
//
// A Shard is owned by one goroutine. It keeps, per pending root, the root
// id, the ack val, the spout task, flags, the group distance and the
// deadline in one 24-byte slot of an open-addressed table allocated once
// for the configured bound (MaxPending), plus one control byte. Apply
// takes a batch of messages and appends the outcomes they cause to a
// caller's slice; Expire reports the roots whose deadline passed, a
// bounded slice of work per call.
//
// # Layout
//
// Two flat arrays, no pointers, so the GC never scans them, each starting
// on a cache line: the slots, in groups of fifteen, and one 16-byte
// control word per group.
//
//	slot  +0   key   uint64   root id; 0 = empty (root ids are never 0)
//	      +8   val   uint64   ack val
//	      +16  meta  uint64   word << 32 | deadline tick mod 2^32 (or near-wheel handle)
//
//	control word: bytes 0..14 the tags of the group's slots (0 = empty),
//	              byte 15 the group's overflow count
//
//	word: 31 init | 30 near | 29..28 timing kind | 27..25 X high bits |
//	      24..20 distance in groups (saturating at 31) | 19..0 task
//	      (without init, bit 0 says a FAIL came first, bit 1 marks a
//	      drain, bits 19..2 hold the orphan's owner, in the top
//	      bits.Len(Owners-1), and its tag)
//
// A root hashes by a keyed hash (hash.go) to a home group, by Lemire's
// fast range (hash*groups>>64, so the group count need not be a power of
// two), and to an 8-bit tag, the next bits of that product (never 0). The
// table has MaxPending*4/3 slots rounded up to whole groups: 25.07 bytes a
// slot, 33.4 bytes per pending root at the bound, timers included (up to
// 16,384 roots MaxPending*10/7 slots, 35.8 bytes a root: table.go).
// Structured root ids (counters, shifted offsets, timestamps) scatter
// like random ones.
//
// A lookup compares the root's tag with its home group's fifteen tags at
// once (ackRun compares the home group and the next in one 32-byte vector
// compare; SWAR in Go) and compares keys only where a tag matches (a
// false match costs one more key compare, a few lookups in a hundred); it
// reads on to the next group only while the group's overflow count says
// that entries homed at or before it live past it. An insert takes the
// first empty slot from the home group on, and adds one to the overflow
// count of each group it passed (on the word count replayed at the
// bound's load, about one entry in seventeen is past its home group at
// 3/4, one in thirty at 7/10, four in five of those in the next group:
// TestWordCountPastHome); a delete empties the slot and its
// tag and takes the entry out of those counts, found from the distance it
// stores. Entries never move: no shifts, no tombstones (the counts are
// exact, so the table never slows down with churn), and what is indexed
// by slot beside the table (ext, progress) stays put. A count that
// reaches 255 stays there (never with a keyed hash at this load; lookups
// then read past that group, slower, never wrong).
//
// # Files
//
//	doc.go           this overview
//	config.go        Config, its defaults, Validate and the memory bound (Bytes)
//	shard.go         the Shard type, NewShard, accessors, StopAll
//	msg.go           messages, outcomes, Interface
//	table.go         the slot and control-word layout and every table
//	                 operation: lookup, insert, delete
//	hash.go          the keyed hash
//	rules.go         the contract's rules on the slow path (step, cur, store)
//	apply.go         the Apply pipeline: chunks, prefetch, the fast path in Go
//	ackrun*.go       the fast path in assembly (ackrun_amd64.s and .h), its glue
//	prefetch*.go     the prefetch pass's slot prefetch (prefetch_amd64.s; none elsewhere)
//	due.go           the shard's time, deadlines and latencies, Expire
//	near.go          the near wheel, the pass and the due lists behind Expire
//	timing.go        per-root start and timeout (timing kinds), side.go kind 3
//	progress.go      ProgressTimeout
//	orphans.go       orphans at the bound; owners.go their owners' shares
//	failfilter.go    FAILs at the bound
//	clock.go         clocks; stats.go counters; check.go invariants, OldestPending
//
// # Timeouts
//
// Every slot stores its deadline. Only entries whose deadline is near are
// found ahead of time (near.go): those made or reset with a deadline
// within about two windows get a timer in a hierarchical timer wheel (the
// near wheel); the others are found by a pass over the table, run a
// window ahead and paced over many Expire calls, which lists each root
// due in the next window on its tick's due list (8 bytes a root, in
// 512-byte chunks) or expires it at once if it is already due. A due list
// is never unlinked from: at its tick each root on it is looked up and
// expired if it is still due. So a root that completes costs nothing
// there, and a wave of a million timeouts costs a few megabytes of chunks,
// freed as it is expired. The window is the table's slot count over 1024
// ticks (64 at least, a quarter of the default timeout at most).
//
// One Expire call reads at most 16,384 slots and due-list
// buckets, looks up at most 1,024 entries through timers and
// due lists, writes at most cap(out)-len(out) outcomes, and says more when
// it stopped early; a call with no room does nothing. The near wheel and
// the due lists go back to their idle size when they empty.
//
// # Per-root timing
//
// A root's start (for its latency) and its timeout (for a RESET) are
// derived from its deadline by the timing kind (timing.go): kind 0, the
// default timeout since the start; kind 1, a per-root timeout of X ticks;
// kind 2, the default timeout after a RESET moved the deadline X ticks
// on; kind 3, start and timeout in a side table. X is 19 bits: three in
// the word, sixteen in an array of uint16 beside the slots, allocated
// while any root of kind 1 or 2 is pending (3 bytes a root). So per-root
// timeouts up to 8.7 minutes at a 1 ms tick, and RESETs within that long
// of the INIT, cost 3 bytes a root and no lookup elsewhere; a timeout
// equal to the default costs nothing.
//
// # FAILs at the bound
//
// A FAIL is never lost while the filter is within its budget (rule 3).
// One that needs a new entry when the table is at its bound takes one of
// failReserve entries beyond MaxPending; past those it goes into a
// two-generation Bloom filter that every INIT is checked against while it
// holds anything, which takes at most a sixteenth of its bits in FAILs
// per generation, so that its false positives stay under 0.5% whatever
// the flood; past that budget a FAIL is dropped and its root times out
// (failfilter.go).
//
// # Orphans at the bound
//
// Entries made without INIT (orphans) give way to INITs: an INIT, ACK or
// RESET that needs a new entry at the bound evicts the oldest orphan of
// the owner holding the most (so a flood evicts its own), found through
// a FIFO of orphan roots whose entries keep a tag in their
// spare task bits, so that a stale root is never taken for a new orphan
// of the same id (orphans.go). Each orphan also keeps its owner there,
// the producer whose message made it (SetOwner, once per batch), and an
// owner with Config.OrphanShare orphans in the table has its next ACK,
// FAIL or RESET for an unknown root refused (owners.go). A FAIL that
// carries the failed tuple's ack val turns its root's entry into a drain
// in place, an orphan owing the tree's tuples still in flight, which the
// last of their ACKs removes (rules.go; rule 3 of docs/semantics.md): the
// late ACKs of a failed tree then XOR into an entry that is already there
// and leave nothing behind. The fast paths stop at every ACK that brings
// a val to 0, so that step sees a drain's last one.
//
// # Batches
//
// On amd64 with AVX2, Apply runs ackRun (ackrun_amd64.s), one assembly loop
// over the batch that calls nothing. It looks ahead in two stages: twelve
// messages ahead it hashes the root and prefetches its home group's control
// word, six ahead it compares the tag with that word and prefetches the
// slot the probe will most likely end at, so that the misses of a dozen
// messages are in flight at once, at every table size (past 24 MiB of
// table, ackRunFar, the same loop, looks 16 and 8 ahead). Then, for the
// message itself, it checks the key in that slot, or compares the tag with
// the home group's control word (VPCMPEQB) and the key where it matches,
// and applies ACKs, completions of roots of timing kinds 0 to 2 (outcome
// with latency, slot and tag emptied), INITs of new roots with the default
// timeout and, at a 1 ms tick, INITs with their own timeout (into the first
// empty slot): together nearly all traffic, per-root timeouts and RESET
// roots included. It stops at anything else (a FAIL, a RESET, an ACK
// without an entry, a near timer, the side table, a full table, no room in
// out), and that message goes through step with the probe ackRun already
// did; then the loop resumes. The assembly takes its field offsets and
// constants from go_asm.h. Elsewhere the same fast path runs in Go
// (fastPath), and the tests run both.
//
// # Where the rules live
//
// The contract's rules (docs/semantics.md) are implemented in full once,
// on the slow path: step (rules.go) says what an INIT, ACK, FAIL or RESET
// does to a root's entry, loaded into a cur, and when the root completes
// or fails; store writes the cur back. The fast paths repeat the common
// cases for speed, not by calling step: the ACK rule (XOR the val in) and
// completion (val 0 after INIT: Completed with its latency, entry
// removed), and the INIT of a new root with the default timeout (ackRun
// also with its own timeout, at a 1 ms tick), in two places: fastPath
// (apply.go) and ackRun (ackrun_amd64.s, glue in ackrun.go; ackRunFar,
// for tables past 24 MiB, is the same body looking further ahead). The
// copies are held to step by the differential tests (diff_test.go: the
// assembly loop near and far, the portable loop and its prefetching, each
// against the model in
// internal/acktest, outcome by outcome and counter by counter)
// and by FuzzShard, which runs both loops.
//
// The portable loop does not look ahead itself: for tables past 6 MiB
// (prefetchAbove, apply.go: the pass measured a loss at 3.4 MB and a gain
// at 10 MB), Apply runs it in chunks of up to 64 messages (starting at 8
// and doubling): it hashes chunk k+1, reads each message's control word
// and prefetches the slot its probe will most likely end at (the first
// tag match, else the first empty slot), then applies chunk k, whose
// lines are by then in cache, keeping a chunk's misses in flight
// together.
//
// # Time
//
// The clock is read once per Apply or Expire call. A root's deadline is
// the first tick boundary at or after its (re)start plus its timeout, so it
// never times out early and, with Expire called every tick, at most one
// tick late. Latencies have a resolution of one tick (error at most half a
// tick). Ticks are at least MinTick, so that MaxTimeout stays within reach
// of a 32-bit deadline. A call moves the shard's time by at most 2^29
// ticks: a longer clock jump counts as that long, which times out every
// root pending at the jump and keeps the 32-bit deadlines unambiguous.
// Expire must run at least once every 2^30 ticks while Apply runs.
//
// # Memory
//
// NewShard allocates the table (24 bytes a slot) and nothing that grows
// with the bound; the ext array, the near wheel, the due lists, the side
// table and the FAIL filter grow with use and shrink back. Config.Bytes is
// the most all of it can reach, checked against Config.MaxBytes before
// anything is allocated; TableBytes is what a shard holds now.
//
// # Public surface
//
// What an acker built on a shard calls: NewShard with a Config (every
// default a Default* constant, every limit a Max* one; Validate and Bytes
// before anything is allocated), the Shard's Apply, Expire, StopAll and
// counters (Stats, OldestPending, the owners' shares); the protocol's
// types (Msg, Outcome, Kind, OutcomeKind and Reason, the one failure
// reason of the project, which package acker, package topology, netio
// and ackerd all use); Clock (NewMonotonicClock, FakeClock for tests);
// Interface, which the baselines the shard is measured against implement
// too. The keyed hash the tables and acker's router share lives in
// internal/roothash; the limits of one Expire call and the accessors only
// the tests read are unexported.
//
// # Concurrency
//
// None: a Shard belongs to one goroutine. Package acker runs one Shard per
// pinned executor goroutine and feeds it through SPSC rings.
//
// # Invariants
//
// Checked by verify (every step under -tags invariants, and by the tests):
// count equals occupied slots and stays within MaxPending plus the FAIL
// reserve; a slot has a tag exactly when it holds a key, and the tag is
// the key's; every key is found at its slot; each group's overflow count
// is the number of entries homed at or before it that live past it
// (unless stuck at 255), and each entry stores its distance in groups; no
// key twice; an entry has a near timer exactly when its flag says so; a
// far entry due before the limit it was compared with is on a due list;
// entries of timing kinds 1 and 2 have the ext array and are counted, the
// side table holds exactly the kind-3 roots; an entry without INIT has no
// task bits but the FAIL and drain flags, its owner (one of Owners) and
// its orphan tag; the orphan count is the number of entries without INIT, each
// owner's count the number of those it owns, and the orphan FIFO holds at least that
// many roots, within its bound.
package ackcore
