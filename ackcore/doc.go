// Package ackcore is xorack's acker: Apache Storm's XOR ack tracking for one
// shard, behind a batch API, with the rules of SEMANTICS.md.
//
// A Shard is owned by one goroutine. It keeps, per pending root, the root
// id, the ack val, the spout task, flags and the deadline in one 24-byte
// slot of an open-addressed table allocated once for the configured bound
// (MaxPending). Apply takes a batch of messages and appends the outcomes
// they cause to a caller's slice; Expire reports the roots whose deadline
// passed.
//
// # Layout
//
// One flat array of 24-byte slots, no pointers, so the GC never scans it,
// starting on a cache line (every eight slots fill exactly three lines):
//
//	slot  +0   key   uint64   root id; 0 = empty (root ids are never 0)
//	      +8   val   uint64   ack val
//	      +16  meta  uint64   word << 32 | deadline tick mod 2^32 (or near-timer handle)
//
//	word:  31 init seen | 30 failed before INIT | 29 custom | 28 near timer |
//	       27..20 probe distance (saturating at 255) | 19..0 task id
//
// A root hashes (seeded multiply) to a home slot by Lemire's fast range
// (hash*n>>64), so the slot count need not be a power of two: the table
// has MaxPending*1.5 slots, 36 bytes per pending root at the bound,
// timers included. Probing is linear. The hot path compares the four
// slots from home at once, without branches (a probe's length is random,
// and a loop would mispredict its exit on about half of all lookups), and
// walks on slot by slot only past them (4% of hits under random churn at
// load 0.62).
//
// Runs of occupied slots are kept in Robin Hood order (sorted by home),
// and each slot stores its probe distance. An insert goes before the
// first entry of its run homed later and shifts the rest of the run
// forward by one; a delete shifts the entries after the hole back by one,
// up to an empty slot or an entry in its home slot. Neither hashes what it
// moves (a saturated distance is recomputed), and there are no
// tombstones, so the table never slows down with churn.
//
// # Timeouts
//
// Every slot stores its deadline. Only entries whose deadline is near get
// a timer in a hierarchical timer wheel (the "near wheel", sized on
// demand): most roots complete long before their timeout, and a timer node
// linked on INIT and unlinked on completion would cost two or three random
// misses per root for timers that never fire. A pass over the table,
// spread over many Expire calls, moves the limit below which entries have
// near timers forward one window (an eighth of the default timeout, or
// longer for tables so big that a pass would read more than 256 slots per
// tick) at a time. Near timers are keyed by root, so slots move freely.
// See near.go.
//
// An entry whose start time cannot be derived from its deadline (after a
// RESET, or with a per-root timeout) keeps its start and timeout in a side
// map.
//
// # Batches
//
// On amd64 with AVX2, Apply runs ackRun (ackrun_amd64.s), one assembly loop
// over the batch that calls nothing: it compares a root's four-slot probe
// window in two vector compares (VPCMPEQQ against the root and against 0),
// walks on slot by slot past it, and applies ACKs, completions of roots
// with the default timeout (outcome, backward shift) and INITs of new
// roots with the default timeout (Robin Hood insert): together nearly all
// traffic. It stops at anything else (a FAIL, a RESET, a per-root timeout,
// a near timer, a full table, no room in out, a shift that crosses a
// running pass), and that message goes through step, the one place all of
// SEMANTICS.md's rules live, with the probe ackRun already did; then the
// loop resumes. Elsewhere the same fast path runs in Go (fastPath, with
// the four keys compared without branches), and tests run both.
//
// For tables larger than L2, Apply works in chunks of up to 64 messages
// (starting at 8 and doubling): it hashes chunk k+1 and prefetches its
// probe windows, then applies chunk k, whose lines are by then in cache,
// keeping a chunk's misses in flight together. With Fold: FoldOn a chunk
// is grouped by root first and each root's messages are applied to one
// loaded entry with one probe (see fold.go); the result equals applying
// them one by one.
//
// # Time
//
// The clock is read once per Apply or Expire call. A root's deadline is
// the first tick boundary at or after its (re)start plus its timeout, so it
// never times out early and, with Expire called every tick, at most one
// tick late. Latencies have a resolution of one tick (error at most half a
// tick). Ticks are at least MinTick, so that MaxTimeout stays within reach
// of a 32-bit deadline; Expire must run at least once every 2^30 ticks.
//
// # Concurrency
//
// None: a Shard belongs to one goroutine. Package acker runs one Shard per
// pinned executor goroutine and feeds it through SPSC rings.
//
// # Invariants
//
// Checked by verify (every step under -tags invariants, and by the tests):
// count equals occupied slots and stays within MaxPending; every key is
// reachable from its home through occupied slots only, runs are in Robin
// Hood order and stored distances are exact; no key twice; an entry has a
// near timer exactly when its flag says so, and a far entry is due no
// earlier than the limit it was compared with; the side map holds exactly
// the entries flagged custom; a FAIL-before-INIT flag never coexists with
// the INIT flag.
package ackcore
