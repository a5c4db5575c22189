// Package timerwheel is a hierarchical timer wheel with cascading over a
// fixed set of integer handles: O(1) Schedule, Reschedule, Cancel and Move,
// exact expiry order, 12 bytes per handle, no allocation and no pointers
// after New.
//
// The design follows Varghese and Lauck's hierarchical wheels (1987): a
// timer sits in a coarse bucket while its deadline is far away and is
// cascaded into finer buckets as time approaches it, down to one bucket per
// tick. Unlike a non-cascading wheel (the Linux kernel's since 4.8, which
// fires a far timer at its coarse bucket's granularity), every timer fires
// at its exact tick. Unlike Kafka's overflow wheels, the levels are fixed
// and need no allocation.
//
// # Layout
//
// A deadline d is written in base 64, one 6-bit digit per level. With
// numLevels = 5 the wheel spans 2^30 ticks (12.4 days at 1 ms), and
// MaxDelay = 2^30 - 1.
//
//	       bits 29..24   23..18    17..12    11..6     5..0
//	d   = [ digit 4  | digit 3 | digit 2 | digit 1 | digit 0 ]
//	         level 4    level 3   level 2   level 1   level 0
//	         2^24 t/slot 2^18      2^12      64        1 tick/slot
//
// A pending timer lives at the level of the highest digit in which its
// deadline differs from now (level 0 when they differ only in digit 0), in
// the slot named by its own digit there. So bucket (level, slot) holds
// exactly the deadlines that share now's digits above level and have the
// slot's digit at level; its range is 64^level ticks. Below the top level
// an occupied slot is always ahead of now's digit at that level; level 4 is
// a ring (a deadline up to MaxDelay ahead may have crossed the 2^30 block
// boundary, and then sits at or behind now's digit, one revolution on).
//
//	level 4  [ ][ ][x][ ] ... [ ]   64 slots x 2^24 ticks   occupied[4] uint64
//	level 3  [ ][x][ ][ ] ... [ ]   64 slots x 2^18 ticks   occupied[3] uint64
//	level 2  [ ][ ][ ][x] ... [ ]   64 slots x 2^12 ticks   occupied[2] uint64
//	level 1  [x][ ][ ][ ] ... [x]   64 slots x 64 ticks     occupied[1] uint64
//	level 0  [ ][x][ ][ ] ... [ ]   64 slots x 1 tick       occupied[0] uint64
//	              ^ now's digit 0: the bucket Expire takes timers from
//
// When now reaches the first tick of an occupied bucket above level 0, the
// bucket is cascaded: its timers are relinked, in order, into the buckets
// their deadlines now map to, all lower. Because a bucket is a function of
// (deadline, now) alone, all timers with one deadline are in one bucket at
// all times, and appending at the tail keeps them in scheduling order: FIFO
// among equal deadlines survives any number of cascades.
//
// Storage is one flat slice of 12-byte nodes, no pointers, so the GC never
// scans it:
//
//	nodes: [ h0 | h1 | ... | h(capacity-1) | s(0,0) | s(0,1) | ... | s(4,63) ]
//	          caller's handles                  320 bucket sentinels
//
//	node:  +----------------+----------------+----------------+
//	       | deadline uint32| prev uint32    | next uint32    |
//	       +----------------+----------------+----------------+
//	       0                4                8                12 (NodeBytes)
//
// Every bucket is a circular doubly linked list through its sentinel node,
// so unlinking a node (Cancel, Reschedule, Move, Expire) touches only the
// node and its two neighbours and never needs to know which bucket it is
// in; when both neighbours turn out to be the same node, that node is the
// sentinel, the bucket is now empty, and the sentinel's index names the
// occupancy bit to clear. An unscheduled handle has prev = next = unlinked
// (2^32-1), which is why MaxCapacity stops 321 short of 2^32. The deadline
// is kept as its low 32 bits and recovered as now + int32(deadline -
// uint32(now)): a pending deadline is never more than MaxDelay < 2^31 from
// now in either direction, since now never passes a pending timer and a
// deadline far in the past is recorded as Now-MaxDelay.
//
// Expire takes timers from the bucket of the current tick. When it is empty
// Expire finds the next tick at which any bucket begins, from the bitmaps:
// at each level, the lowest set bit above now's digit (the first level that
// has one wins, since a lower level's buckets all begin before a higher
// level's next boundary); the top ring is searched with one rotation. It
// jumps now there, cascades, and repeats. So Expire over an idle gap of any
// length costs O(levels) per non-empty bucket passed, not O(ticks): a jump
// of an hour at 1 ms over an empty wheel is one bitmap scan. Each timer is
// cascaded at most numLevels-1 = 4 times, so the amortized cost per timer
// is O(levels) = O(1).
//
// # Concurrency
//
// A Wheel has a single owner: it is not safe for concurrent use, and every
// method, including the read-only ones, must be called from the goroutine
// that owns it (or under the owner's lock). All fields are written by the
// owner only. Capacity and the node slice's length are immutable after New.
//
// # Invariants
//
// Checked by (*Wheel).check, which tests call directly and which runs after
// every operation when built with -tags invariants (amortized on wheels of
// more than 4096 nodes; a constant-time check of the touched nodes runs
// every time):
//   - each bucket list is circular through its sentinel with mirrored links
//     and holds handle nodes only;
//   - a scheduled timer is in exactly one bucket, the one bucketOf gives for
//     max(deadline, now); in particular only the current tick's bucket holds
//     deadlines at or before now, and now never passes a pending timer;
//   - every pending deadline is within MaxDelay of now;
//   - occupied[level] bit slot is set exactly when bucket (level, slot) is
//     non-empty;
//   - an unscheduled handle has prev = next = unlinked, and Len() equals the
//     number of scheduled handles.
//
// Handle misuse (out of range, Schedule of a scheduled handle, Move onto a
// scheduled handle) is a programmer error: with -tags invariants it panics
// with a message naming the handle. In release builds an out-of-range
// handle panics in Go's bounds check (handles are indexed through a slice
// that ends before the sentinels); Schedule of a scheduled handle acts as
// Reschedule, and Move onto a scheduled handle cancels that handle's timer
// first, so misuse never corrupts the lists.
//
// The package is internal: ackcore's shard and the harness's baselines
// are built on it, and nothing of it shows in their APIs (a shard's
// timer resolution is ackcore.Config's Tick, a time.Duration).
package timerwheel
