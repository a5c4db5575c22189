// Package baseline holds the ackers xorack measures itself against, each a
// separate, straightforward implementation behind ackcore.Interface and
// configured like the shard (MaxPending, Timeout, Tick, Clock):
//
//   - GoMap: the acker a good Go programmer writes with the built-in map,
//     map[uint64]entry keyed by root, timeouts on the project's timer wheel
//     (handles from a free list that maps handle -> root). Semantics
//     identical to ackcore.Shard and internal/acktest/model, counters
//     included, drains too: a FAIL carrying a val leaves what its failed
//     tree still owes as an orphan its last ACK removes (rule 3 of
//     docs/semantics.md, Stats.OrphansDrained).
//   - MutexMap: GoMap behind a sync.Mutex, for many producer goroutines
//     calling Apply themselves.
//   - XsyncMap: the same semantics (drains included) on xsync's
//     concurrent MapOf, one Compute per message, timers behind a mutex.
//   - Storm: a port of Apache Storm 2.x's acker algorithm (a RotatingMap
//     of 3 Go maps rotated once per timeout). Its own semantics: see the
//     type's doc for where it differs from docs/semantics.md.
//   - Limit: not an acker. A flat open-addressed table doing only the XOR,
//     insert and delete every acker must do: the memory system's limit.
//
// The differential test (diff_test.go, on internal/acktest) holds GoMap,
// MutexMap and XsyncMap to the model message by message, and
// drains_test.go walks them through the drain rule case by case; Storm
// and Limit have tests of their own.
//
// # Layout
//
// Bytes per pending root, before the hash tables' own overhead (load
// factor, control bytes, xsync's pointer per entry):
//
//	GoMap      key 8 + entry 16 (val 8, task|flags 4, handle 4)
//	           + handle pool 12 (root 8, free 4) + wheel node 12, per MaxPending
//	XsyncMap   key 8 + xentry 32 (val, start, timeout, task|flags, handle)
//	           + the same pool and wheel
//	Storm      key 8 + stormEntry 24 (val, start, task, failed)
//	Limit      slot 24 (root, val, task, pad) at load <= 1/2
//
// GoMap keeps a root's start and per-root timeout in a side map only when
// they cannot be derived from its deadline (a RESET, a custom timeout), as
// the shard does, so that the two differ in the hash table only.
//
// # Concurrency
//
// GoMap, Storm and Limit are single-writer, like the shard: one goroutine
// owns each and calls Apply and Expire. MutexMap and XsyncMap are safe for
// any number of goroutines calling Apply, Expire and Stats at once. In
// XsyncMap the counters are atomics added once per call, the pending count
// an atomic that a new entry increments before it is stored, which keeps
// the bound exact; the timer wheel and handle pool are guarded by one
// mutex taken inside Compute (bucket lock, then mutex; never the reverse).
//
// # Invariants
//
// Each exact baseline's Verify checks, when no call is in flight: every
// entry holds a distinct handle that maps back to its root and has a
// timer; the free handles are exactly the others; the number of entries is
// at most MaxPending; flags are consistent (failed-before-INIT never with
// INIT; a drain has neither, and owes a val not 0). Limit's Verify checks its probe invariant. The differential test
// calls Verify every 16 steps.
//
// # Allocation
//
// Measured by TestAllocs after warm-up: GoMap, MutexMap, Storm and Limit
// allocate nothing per Apply or Expire once their maps have grown to the
// working set (GoMap and MutexMap presize theirs for MaxPending). XsyncMap
// allocates once per insert and once per update (MapOf keeps each entry
// behind its own immutable pointer, so an update is a new entry): 0.9 per
// message on word-count trees, where a root is 1 insert, 8 updates and 1
// delete. Its Compute callbacks do not escape and allocate nothing.
//
// The package is internal: only the harness (package bench and its
// pipeline level) builds these ackers; what they measured is public in
// ackbench's reports, their code is not an API.
package baseline
