// Package acker is xorack's sharded, concurrent acker: N single-writer
// ackcore.Shards, each owned by one executor goroutine (pinned to a CPU
// when asked), fed by SPSC rings from the goroutines that emit and ack,
// reporting outcomes into SPSC rings read by the spout executors. No locks
// and no shared writes on the message path.
//
// # Layout
//
// Each root belongs to one shard (a hash of the root, independent of the
// shards' table hashes). Producer p owns one SPSC ring into every shard
// and stages messages in place, publishing a span per Batch messages or
// Flush. Each executor drains its rings a Batch per ring per pass, applies
// them, and hands the outcomes to their receivers' rings with one publish
// per receiver per applied batch; a full outcome ring never blocks the
// executor (the rest waits and goes first next pass). Between passes the
// executor samples the clock and, once per tick, expires.
//
// Outcomes go to receivers: by default one per spout task
// (TaskReceiver(t)), or, with Config.Receivers, one per group of tasks,
// such as the tasks of one spout executor (Storm's executors take the acks
// of all their tasks from one queue). Each shard then publishes one span
// per receiver per applied batch, and the executor polls one handle.
//
// # Concurrency
//
// A Producer belongs to one goroutine, and so does a Receiver; the
// executors own their shards. Stats, Plan and Stop may be called from any
// goroutine.
//
// Taking outcomes: a spout executor that both emits and takes its acks
// (as Storm's does) should Poll its receiver in its own loop, between
// emits and while it has nothing to emit. One goroutine per task calling
// Wait or Run is simpler, but each is one more goroutine wanting a
// processor: when runnable goroutines outnumber GOMAXPROCS, one queued
// behind a busy executor waits for the scheduler's next preemption
// (milliseconds). On 2 vCPUs, one producer polling its receiver saw its
// roots complete in 6.7-7.7 µs at the median against 16-92 µs with 16
// spout goroutines, and at the 99th percentile in 0.12-0.35 ms against
// 2.3-4.8 ms (BenchmarkAckerLatency, BENCHMARKS.md). Stop reports the
// roots still pending to their receivers and waits for them to be taken:
// call it from a goroutine other than the pollers, and poll until Wait
// returns false.
//
// # Port
//
// An engine talks to its acker through Port (senders, inboxes, Stop), so
// that a remote acker can stand in for the in-process one: *Acker is a
// Port, and so is the network acker's client.
package acker
