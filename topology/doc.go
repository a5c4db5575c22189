// Package topology is xorack's reference stream engine: spouts and bolts
// by name, parallelism in tasks and executors, Storm's groupings and named
// streams, and Storm's whole reliability mechanism — anchoring, acking,
// failing, replay and timeouts — on the acker of package acker, in one
// process. It is the small real engine that shows how to embed the acker
// and proves the guarantee end to end (Storm's LocalCluster is the
// comparison), and it goes further than Storm where users asked: typed
// outcomes, kept values and a retry policy with a dead-letter hook, a
// retry-storm breaker, attempt numbers seen by bolts, counted late acks,
// capped RESETs, an adaptive pending bound and exact metrics
// (docs/semantics.md, "The engine").
//
//	b := topology.NewBuilder()
//	b.Spout("sentences", newSentenceSpout).Output("sentence")
//	b.Bolt("split", func() topology.Bolt { return topology.Basic(split) }).Tasks(2).
//		Input("sentences", topology.Shuffle()).Output("word")
//	b.Bolt("count", newCounter).Tasks(2).Input("split", topology.Fields("word"))
//	top, err := b.Build(topology.Config{})
//	...
//	top.Start()
//	<-top.Done() // every sentence fully processed (or dead-lettered)
//	top.Stop(ctx)
//
// # Public surface
//
// What an embedder calls, one name per role: NewBuilder, its Decl and the
// groupings to declare components and streams; Config (every default a
// Default* constant; RetryPolicy, Breaker, Adaptive) for Build; the
// Topology it returns (Start, Done, Err, Drain, Stop, Metrics and
// AckerStats, StatusHandler, Plan); the Spout, Bolt and BasicBolt
// interfaces with one collector each (On names a stream); Tuple's values
// and origin; and what a failure says: Failure, whose Reason is
// ackcore.Reason (the one failure reason from the shard to the spout),
// DeadLetter, PanicError, Held. Executors, slots, rings and the breaker's
// state are internal.
//
// # Layout
//
// Components are numbered in topological order, and so are their tasks
// (global task ids, what EmitDirect takes). Each component's tasks are
// spread evenly over its executors; an executor is one goroutine running
// its tasks one call at a time. By default a component has an executor
// per task, as in Storm (Tasks(4) alone runs 4 goroutines); Executors
// sets fewer. A bolt executor has one FanIn (package
// ring) with one SPSC ring per upstream executor; an emitter stages the
// tuples for each downstream executor and publishes them a batch at a
// time (Config.Batch), one compare-and-swap per batch.
//
// Tuples travel as *Tuple: the values (shared by every task a tuple goes
// to), the stream, the source and destination tasks, and its anchors. An
// anchor is one tree the tuple belongs to:
//
//	anchor  +0   root     uint64  the root id
//	        +8   edge     uint64  this tuple's edge id in that tree
//	        +16  born     int64   the root's emit time (engine clock, ns)
//	        +24  spout    uint32  the root's spout task, as the acker numbers them
//	        +28  attempt  uint32  the root's attempt, from 1
//
// A tuple keeps one anchor inline (a tree of one spout tuple, the common
// case) and more in a slice (a tuple joined to several trees by
// multi-anchoring). Anchoring a child to input a draws a fresh edge id e
// per destination task from the executor's generator (wyrand, about a
// nanosecond), XORs e into a's ack val and gives the child e under each of
// a's roots; acking a sends, per root, ACK(root, edge ^ ackval). A spout
// emit sends INIT(root, task, XOR of its tuples' edge ids).
//
// A spout executor keeps one slot per pending root: the message id, the
// values, the stream, the attempt and the emit time. Root ids are random
// in their high bits and carry the slot's index in their low bits, so an
// outcome finds its slot with a mask, no map; the acker routes and places
// roots by a keyed hash (docs/semantics.md, rule 12), so the structured low
// bits cost nothing. Slots are allocated once, twice Config.MaxSpoutPending
// per task rounded up to a power of two: MaxSpoutPending roots in flight
// and as many waiting for a replay. A failed root keeps its slot while it
// waits for its replay (a heap by due time), outside the in-flight bound,
// and gets a fresh root id for each attempt, so acks from an earlier
// attempt cannot touch a later one. New messages Next emits while the
// retry-storm breaker is open are held apart from the slots (at most
// MaxSpoutPending a task), and take a slot when the breaker lets them
// start (control.go has the breaker's rules).
//
// The spout executor is one type over three files, one goroutine's
// state: spout.go has its loop (asking Next, waiting, stopping, the
// user-code calls), spout_slots.go its slots (room, emits, held messages,
// starting a root and its INIT), spout_outcomes.go what comes back
// (outcomes, failures, replays and the retry queues, bolts' errors).
//
// # Concurrency
//
// Every executor owns its tasks, its output staging, its id generator,
// its acker sender (acker.Port's Sender(executor id)) and its counters. A
// tuple is written by its emitter before the ring publishes it and
// belongs to the receiving executor after; its ack val and state are
// written by that executor only.
//
// A spout executor polls its own acker inbox in its loop, between calls
// to Next, and never blocks in a send: INITs go by TrySend (queued when
// the acker's ring is full) and tuples are published without waiting
// (staged when a ring is full, and Next is not called until they are out).
// An acker whose outcome ring to a spout is full may hold back the bolts'
// sends, which hold back their inputs; the spout keeps draining its inbox,
// so the cycle never closes. Bolt executors do wait for ring space and
// acker room: the topology has no cycles (Build rejects them), so what is
// downstream of a bolt always drains.
//
// With Config.ProgressTimeout the in-process acker follows each tree's
// last progress itself (ackcore.Config.ProgressTimeout). On an acker
// behind Config.Port a bolt reads the engine clock once per pass and,
// acking a tuple of a root older than a quarter of the timeout, sends a
// RESET for the root before the ACK (folded per root within the pass),
// so that acker's deadline follows the tree's last progress too.
//
// Three fields are shared across executors, each documented where it is:
// a spout executor's live[] table (the root each slot waits on, written by
// the spout, read atomically by bolts, which send no ACK for a root that
// is not live and count it late, and cleared by the first bolt to fail
// the root, by compare-and-swap), its errBox (the
// error of an explicit failure, put by the failing bolt under a mutex
// before it sends the FAIL, taken by the spout with the outcome), and
// each executor's published counters (copied under a mutex once a
// millisecond while busy and before waiting; Metrics reads them).
//
// Tracing (trace.go) shares a traced root's rootTrace among the
// executors its tuples pass: its mutex guards it, and only the one root in
// Config.TraceEvery that is traced takes it; a component's timeoutsHeld
// is an atomic added to by spout executors. A bolt executor's sampled
// execute latencies are published with its counters, under the same
// mutex, and so are a spout executor's complete latencies: it holds
// those since its last publish as values (at most 4,096, then it
// publishes) and records them into the published histogram then, since
// merging one histogram into another walks every bucket up to the
// highest latency, and an executor that idles often publishes often.
// The status page (status.go) reads Metrics and keeps the previous load's
// under its own mutex.
//
// Pin (Config.Pin): Start makes one affinity.Planner for the machine;
// the in-process acker's shards take their CPUs from it first
// (acker.Config.Planner), then the executors, so no two pinned threads
// share a CPU; where they would (more threads to pin than allowed CPUs),
// nothing is pinned, the acker's shards neither, and Plan's Note says why
// (TestPinOnePlanner). The plan is made before any thread starts and read
// under Topology.mu (Plan).
//
// Stop: first the drain (the draining flag: Next is not called, replays
// go on) until nothing is pending or the context ends; then the spouts
// stop emitting and replaying; then the acker is stopped,
// which reports every pending root Failed{Stopped} to its spout, whose
// executor reports it to the spout's Fail (and so the roots waiting for a
// replay, and any whose INIT never reached the acker); then the bolts are
// stopped in topological order, each after executing what was queued.
//
// # Invariants
//
//   - Every tracked message gets exactly one final outcome: the spout's
//     Ack, or its Fail after the last attempt (with the dead-letter hook)
//     or at shutdown. The fault tests check this message by message. A
//     Redeliverer's message is one attempt: its Ack, or its Fail for the
//     attempt (its source redelivers it as a new message).
//   - A spout task never has more than its pending bound of roots in
//     flight or waiting for a replay, unless a single Next emits more than
//     one tracked tuple (the slots are rounded up; past them Emit fails).
//   - A slot's root is live (live[i] == root) only while it is in
//     flight: the spout stores it before the first tuple is published
//     and clears it with the outcome; a bolt failing it clears it first
//     (a compare-and-swap), after which no ACK, RESET or second FAIL is
//     sent for it. Outcomes for any root not in flight are counted as
//     stale, never applied.
//   - Edge and root ids are never 0.
//   - User code runs under recover (a bolt's Execute one batch per
//     deferred recover, each spout callback its own): a panic fails the
//     tuple being executed with ackcore.ReasonPanic and is counted, and the
//     engine's own state is updated before each callback into a spout, so
//     no panic leaves a slot or a count behind.
package topology
