// Package ackcore is xorack's acker: Apache Storm's XOR ack tracking for one
// shard, behind a batch API, with the rules of SEMANTICS.md.
//
// A Shard is owned by one goroutine. It keeps, per pending root, the root
// id, the spout task and the ack val (20 bytes) in an open-addressed table,
// and a timer in a hierarchical timer wheel (12 bytes), in flat arrays
// allocated once for the configured bound (MaxPending). Apply takes a batch
// of messages and appends the outcomes they cause to a caller's slice;
// Expire reports the roots whose deadline passed.
//
// # Layout
//
// The table is cut into groups of eight slots. Each group's keys and vals
// share one 128-byte block (two cache lines, in one page); its words and
// its metadata live in parallel arrays. A probe reads one group's keys, one
// 64-byte line, and compares all eight without branches (contiguous keys:
// one 512-bit compare on hardware that has it, eight independent scalar
// compares here):
//
//	kv block g   +0   keys  [8]uint64   64 B  line 1   root ids; 0 = empty
//	             +64  vals  [8]uint64   64 B  line 2   ack vals
//	words        [8]uint32 per group   32 B            task (29 bits) | flags
//	meta         uint16 per group       2 B            displaced mask << 8 | occupancy mask
//	wheel node   slot i <-> timer handle i: deadline, prev, next (3 x uint32)
//
//	word:  31 init seen | 30 failed before INIT | 29 custom | 28..0 task id
//
// A root hashes (seeded multiply-xorshift) to a home group by Lemire's fast
// range (hash*ngroups>>64), so the group count need not be a power of two:
// the table is sized to MaxPending/(7/8) slots, not to the next power of
// two, which is what keeps the whole entry under 40 bytes per pending root
// at the bound (a power-of-two table would need 52 at 10,000 roots).
// Probing walks groups linearly and stops at the first group with a free
// slot. Deletion shifts entries back (an entry in a later group whose probe
// passed the hole's group moves into the hole, and so on; only entries
// flagged displaced are candidates) and leaves no tombstones. Each move of
// an entry also moves its timer (Wheel.Move), since timer handles are slot
// numbers.
//
// Per entry: 8 (key) + 8 (val) + 4 (word) + 12 (timer) + 0.25 (meta) =
// 32.25 bytes per slot; at the 7/8 bound that is 36.9 bytes per pending
// root. An entry
// whose start time cannot be derived from its deadline (after a RESET, or
// with a per-root timeout) keeps its start and timeout in a side map.
//
// # Batches
//
// Apply works in chunks of up to 64 messages (starting at 8 and doubling).
// It hashes chunk k+1 and, for tables larger than L2, prefetches its groups'
// lines (and the next group's where the home group is full) with
// PREFETCHT0, then applies chunk k, whose lines are by then in cache: a
// software pipeline that keeps a chunk's misses in flight together. The
// probe is written out inline in the loop; ACKs that find their entry and
// do not complete it (most traffic) write one val and touch nothing else.
// Everything else goes through step, the one place the rules live. With
// Fold: FoldOn a chunk is grouped by root first and each root's messages
// are applied to one loaded entry with one probe (see fold.go); the result
// equals applying them one by one.
//
// # Time
//
// The clock is read once per Apply or Expire call. A root's deadline is
// the first tick boundary at or after its (re)start plus its timeout, so it
// never times out early and, with Expire called every tick, at most one
// tick late. Latencies have a resolution of one tick (error at most half a
// tick).
//
// # Concurrency
//
// None: a Shard belongs to one goroutine. The sharded acker (Acker) runs
// one Shard per pinned executor and feeds it through SPSC rings.
//
// # Invariants
//
// Checked by verify (every step under -tags invariants, and by the tests):
// count equals occupied slots and stays within MaxPending; every key is
// reachable from its home group through full groups only; no key twice; a
// slot has a scheduled timer exactly when it is occupied; the side map
// holds exactly the entries flagged custom; a FAIL-before-INIT flag never
// coexists with the INIT flag.
package ackcore
