// Package pipeline is the concurrent acker under test at pipeline level
// and the baselines it is measured against, built once and driven by one
// rig: ackbench's pipeline level (package bench), which BenchmarkAcker in
// package bench runs as a Go benchmark.
//
//   - xorack: acker.Acker: producers -> SPSC rings -> shard executors ->
//     outcome rings -> receivers.
//   - mutexmap: one baseline.MutexMap that every sender applies its
//     batches to under its lock, a goroutine expiring roots every tick,
//     and the outcomes appended to mutex-guarded inboxes: the "map with a
//     lock shared by producers" design.
//   - chanshard: one ackcore.Shard on a goroutine fed by a Go channel of
//     64-message blocks and answering through a channel of outcome blocks
//     per receiver: what a Go programmer builds before reaching for rings.
//
// Each is a Pipe: an acker.Port (Sender, Inbox, Stop), so a rig drives
// them all the same way an engine drives an acker, plus Start, Stats and
// Placement.
//
// # Layout
//
// Every pipe has the shape of Config: Producers senders, Tasks spout tasks
// mapped onto Receivers inboxes by ReceiverOf (task mod Receivers by
// default), Shards × MaxPending roots in all (xorack spreads them over its
// shards; the baselines have one table of that size). A sender stages up
// to Batch messages and hands them over when the next message finds them
// full, or on Flush (xorack: a ring span per shard; mutexmap: one Apply
// under the lock; chanshard: one channel send per 64), so that a rig that
// sends a batch and flushes hands the whole batch over at the Flush in
// every pipe.
//
// # Concurrency
//
// A Sender belongs to one goroutine and so does an Inbox, as in package
// acker. Stats and Placement may be called from any goroutine. Stop must
// come after every sender is done (the baselines close channels a late
// send would panic on); it waits for the outcomes of the roots still
// pending to be taken (xorack and chanshard), so the inboxes must keep
// being read until Wait returns false.
//
// # Invariants
//
// Each root's outcome reaches the inbox of its task exactly once, in every
// pipe: TestPipes runs random trees through each and counts.
//
// The package is internal: only the harness drives these pipes (its
// pipeline and net levels); an embedder drives acker.Acker
// itself.
package pipeline
