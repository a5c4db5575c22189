// Package acker is xorack's embeddable at-least-once acker (Apache
// Storm's XOR acker), sharded and concurrent. A spout announces each root
// with the XOR of the edge ids it emitted; bolts ack edges; the root's
// receiver learns whether its tree completed or failed.
//
//	a, err := acker.New(acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 1},
//		Shard: ackcore.Config{MaxPending: 1 << 16}})
//	if err != nil {
//		return err
//	}
//	a.Start()
//	p := a.Sender(0) // one per goroutine that emits or acks
//	root, e1, e2 := acker.EdgeID(), acker.EdgeID(), acker.EdgeID()
//	p.Send(ackcore.Msg{Root: root, Kind: ackcore.Init, Val: e1 ^ e2}) // the spout emitted two tuples
//	p.Send(ackcore.Msg{Root: root, Kind: ackcore.Ack, Val: e1})        // a bolt acked each
//	p.Send(ackcore.Msg{Root: root, Kind: ackcore.Ack, Val: e2})
//	p.Flush()                          // Send stages, Flush publishes
//	outs, _ := a.Inbox(0).Wait(nil)    // outs[0]: Completed, or Failed{reason}
//	// On Failed, replay the message: a replay is a new root (a fresh EdgeID).
//	st, err := a.StopContext(ctx) // its error names whatever it could not deliver
//
// Every call that cannot do its part says so: Send before Start, after
// Stop or with a malformed message returns an error; messages staged and
// never flushed are counted by Stop, per producer (StopError,
// Acker.NotApplied); Stop waits for the receivers at most until its
// deadline, then names the receivers that did not take their outcomes
// (StopError). The design follows.
//
// N single-writer ackcore.Shards, each owned by one executor goroutine
// (pinned to a CPU when asked), are fed by SPSC rings from the goroutines
// that emit and ack, and report outcomes into SPSC rings read by the spout
// executors. No locks and no shared writes on the message path.
//
// An engine talks to it through Port (Sender, Inbox, Stop), so that a
// remote acker can stand in for the in-process one: *Acker is a Port, and
// so is the network acker's client.
//
// With Config.Pin each executor pins itself to a CPU. An engine that pins
// its own threads too gives the acker its affinity.Planner
// (Config.Planner): New takes the shards' CPUs from it and the engine
// takes its threads' next, so none share a CPU (package topology does
// so). Without a Planner the shards are planned alone, from the first CPU
// of the machine's spread order. Where the shards outnumber the CPUs left
// to plan, none is pinned (Plan's note says so): pinned threads that share
// a CPU run slower than unpinned ones.
//
// # Layout
//
//	producer 0 ─┬─ ring ─▶ executor 0 (shard 0) ─┬─ ring ─▶ receiver 0
//	producer 1 ─┼─ ring ─▶ executor 1 (shard 1) ─┼─ ring ─▶ receiver 1
//	   ...      └─ ...                           └─ held queue (per receiver, when its ring is full)
//
// Routing. Each root belongs to one shard: the shard tables' own keyed
// hash (internal/roothash: the 128-bit product of root^k1 and k2, its halves
// XORed, times k3), under keys of the router's own, reduced to [0,
// Shards) by a multiply, with keys drawn from crypto/rand in New unless
// Config.Seed sets them. Structured ids (counters, i<<16, timestamps,
// offset<<16|partition) spread as evenly as random ones (the fullest of
// 2 to 64 shards within 1.2x the mean under every seed tried), and
// without the keys no one can choose ids that land on one shard.
//
// Messages. Producer p owns one SPSC ring into every shard (RingSize
// messages of 32 bytes) and stages messages in place, publishing a span
// per Batch messages or on Flush: one compare-and-swap (ring's publish) per
// span. Each executor
// drains its rings a Batch per ring per pass, applies them, and samples
// the clock once per pass; once per tick it expires.
//
// Outcomes. Each shard has one SPSC ring into every receiver
// (OutcomeRingSize outcomes of 32 bytes). The executor gathers a pass's
// outcomes (up to routeChunk = 1024), groups them by receiver, and hands
// each receiver its share with one PushBatch: one compare-and-swap per
// receiver per pass, not per applied span. By default there is one
// receiver per spout task; Config.Receivers groups tasks, such as the
// tasks of one spout executor (Storm's executors take the acks of all
// their tasks from one queue).
//
// # Bounded delivery
//
// A receiver that stops taking outcomes never blocks its shard and never
// makes it grow without bound. What its full ring cannot take, the shard
// holds in a per-receiver queue of 16 KiB chunks (O(1) per outcome to hold
// and to hand over, whatever the backlog; emptied chunks are reused or
// freed), and hands over, oldest first, as the ring makes room. Once a
// shard holds Config.Backlog outcomes for a receiver, it holds back new
// INITs of that receiver's tasks: producers see a per-shard flag before
// staging an INIT (one load of a line that changes only when a receiver
// falls behind or catches up), Send waits for it to clear and TrySend says
// no. ACKs, FAILs and RESETs always flow, so trees already started finish,
// and the other receivers' tasks are not slowed. The hold ends when the
// receiver has taken half of what was held. The receiver is isolated, not
// the shard.
//
// The bound. Once a receiver is held back, a shard can still produce for
// it at most one outcome per root of its tasks then pending (at most
// MaxPending in all) and one per INIT staged before its producer saw the
// flag (at most a ring's worth, RingSize + 1, per producer). So a shard
// holds at most Receivers × (Backlog + a route chunk + partial chunks) +
// MaxPending + Producers × (RingSize + 1) outcomes beyond its rings, plus
// MaxPending while Stop reports every pending root: Footprint.Held. New
// adds it to the tables and rings and refuses a configuration whose
// Footprint exceeds Config.MaxBytes, naming the bytes, before allocating
// anything. TestStuckReceiver sends 10,000,000 messages with one receiver
// never polled and checks the heap against it; with -short, as CI's race
// run has it, 1,000,000.
//
// Visibility. A Receiver's Stats reports a receiver's Backlog (in its rings
// and held), Held, how many shards hold back its INITs (HeldBack), the
// outcomes it took, and the time since it last took one (SinceTake): a
// receiver with a Backlog whose SinceTake keeps growing, or with HeldBack
// above 0, is a stuck spout an engine can name. OldestPending lists the
// oldest pending roots across shards.
//
// Delivery is exactly once through Poll, Wait, WaitUntil and Run, also
// when a Run callback panics: Run copies a batch out of the rings and
// releases them before calling back, counts each outcome delivered before
// its callback runs (the one that panicked is not delivered again), and
// hands the rest of the batch to the next Run, Poll, Wait or WaitUntil.
//
// # Concurrency
//
// A Producer belongs to one goroutine, and so does a Receiver (the
// goroutine that takes from it); the executors own their shards. Stats,
// a Receiver's Stats, OldestPending, Plan, Footprint, Stop and StopContext may
// be called from any goroutine.
//
// Who writes what. Ring indices: as in package ring (the producer its
// tail, the consumer its head). A shard's hold-back flags (gate) and its
// per-receiver held counts: its executor only; producers and
// Receiver.Stats read them. A receiver's count of shards holding for it:
// the executors, atomically; the receiver reads it after each take and,
// when not 0, wakes those shards (a send on their wake channel), so held
// outcomes move as soon as there is room, not at the next tick. A
// receiver's take count and time: its goroutine only. Plan: under
// Acker.mu, from New on (Start may add a pin failure to its Note).
//
// A goroutine that is both a producer and the poller of a receiver (a
// spout executor that emits and takes its acks) must not wait in Send for
// an INIT of its own receiver's tasks: while it waits, nobody takes the
// outcomes that would release it. It sends those INITs with TrySend and,
// while TrySend says no, polls its receiver (and flushes) before trying
// again; TestSpoutPollsWhileHeldBack runs that loop with a Backlog of 8.
// Send is safe for every other INIT and for every ACK, FAIL and RESET:
// the executors never wait on a receiver, so a full ring always drains.
//
// Taking outcomes: a spout executor should Poll its receiver in its own
// loop, between emits and while it has nothing to emit. One goroutine per
// task calling Wait or Run is simpler, but each is one more goroutine
// wanting a processor: when runnable goroutines outnumber GOMAXPROCS, one
// queued behind a busy executor waits for the scheduler to preempt it (Go
// preempts a goroutine that has run for 10 ms), so the outcomes of its
// tasks wait too. Plan's Note says,
// from New on, when executors and producers alone outnumber GOMAXPROCS
// ("oversubscribed: ..."). Stop reports the roots still pending to their
// receivers and waits for them to be taken (until StopContext's deadline,
// or Config.StopTimeout for Stop, logging every second who holds how
// many): call it from a goroutine other than the pollers, and poll until
// Wait returns false.
//
// Stopping. Stop seals every producer ring (a publish either lands before
// the seal and is applied, or is refused) and the executors drain their
// rings to empty. A producer reserves a span once per Batch messages and,
// only then, writes open[s] (the count it has published into shard s,
// plus one) before it looks for the seal; Stop, once the executors exit,
// finds a span still unpublished where shard s applied exactly that count
// of the producer's messages, reads how many messages are staged in it
// (the count the producer keeps in a word of its own, read once by Stop:
// no store on the send path beyond what it did before) and marks the span
// counted with that number (a compare-and-swap of open[s]). A producer
// that finds a ring sealed swaps open[s] out (its own compare-and-swap, on
// that slow path only) and reports, in a NotAppliedError, only what Stop
// did not count: staged after Stop looked (a call that overlapped Stop),
// or refused at the seal. StopError names each producer with its count
// (UnflushedProducer), and Acker.NotApplied(p) adds both, and, for a
// producer that never calls again after a send that overlapped Stop and
// returned nil, what that send staged past Stop's count: after Stop it
// reads the fill of every span still open and unpublished once more, and
// adds what exceeds Stop's count (a span the producer retired is not
// read: its call reported). So every message a send accepted is applied
// (one outcome, for an INIT) or reported not applied once, and
// NotApplied counts it, exact once the producer's goroutine is quiet
// (its last call happens before NotApplied's: a WaitGroup), with no cost
// on the send path. TestStopUnflushed checks Stop's count for producers
// not in a call; TestStopLateStage plays a send staging past Stop's
// count, with and without a later call; TestStopRaceSend (producers that
// call again) and TestStopRaceLastSend (producers that never do) hold
// accepted = outcomes + NotApplied, per producer, over hundreds of rounds
// a run beside two busy processes.
//
// Scaling. A producer stages into one span per shard, so with S shards a
// producer that flushes every k messages publishes up to S spans of about
// k/S messages (more publishes, and smaller applies per message), and
// every executor and every polling goroutine wants a core of its own. Add
// shards while cores remain free for them and their producers. Two costs
// that grew with shards and producers are gone: an executor used to hand
// outcomes to the receivers after every applied span (up to Producers ×
// Receivers publishes a pass), now once per receiver per pass; and it
// yielded its processor after waking a receiver, which for a pinned
// executor (a locked thread) means handing its processor to another
// thread and waiting to get it back, now only when executors and
// producers fill every processor (otherwise the runtime gives the woken
// receiver an idle one).
//
// Waiting. An executor with nothing to apply looks at its rings for
// 16,384 looks (some 16-30 µs, about what one wake-up of a parked
// thread costs the producer that wakes it), yields a few times, then
// parks until a producer, a receiver or its tick wakes it. That long spin
// is the default only while the executors leave a processor to spare
// (Shards below GOMAXPROCS); otherwise, and for producers waiting on a
// full ring and receivers waiting for outcomes, the wait is ring's short
// one, as spinning then takes the processor from whoever would make
// progress. Config.Idle overrides both; an engine whose own goroutines
// share the processors with the executors (the topology package) passes
// ring.DefaultIdle().
//
// # Invariants
//
//   - Every message of a root goes to the same shard (the router is
//     immutable after New), so one shard owns each root.
//   - Each root with an INIT gets exactly one outcome, delivered once to
//     the receiver of its task; outcomes with no task (Refused ACK, FAIL,
//     RESET) are counted, not delivered.
//   - Outcomes for a receiver reach it in the order its shard produced
//     them: the held queue is FIFO and goes first, before anything new
//     enters the ring.
//   - A shard holds at most Footprint.Held / Shards bytes of outcomes
//     beyond its rings; nothing allocates on the message path in steady
//     state (TestHotPathAllocs).
//   - Out-of-range handles (Sender(i), Inbox(r),
//     ReceiverOf(t)) are programmer errors: they panic, naming the index
//     and the range. Everything from a configuration returns an error, and
//     so does every malformed message, at the call.
//   - Every message a send accepted is applied or reported not applied,
//     once: counted by Stop (StopError.Unflushed), by its producer's
//     call (NotAppliedError), or, staged past Stop's count by a producer
//     that never called again, by NotApplied's own read; all in
//     Acker.NotApplied. Every outcome is delivered or counted dropped
//     (StopError, ReceiverStats.Dropped).
//
// The contract the shards keep (completion, timeouts, failures, the
// pending bound) is in docs/semantics.md.
//
// # Public surface
//
// What an engine embedding the acker calls: New with a Config (its Spec,
// Default* values and Max* limits), Start, Stop and StopContext, the
// handles, and what they report (Stats, Footprint, Plan, OldestPending,
// the errors). The handles have one accessor each, the Port's: Sender(i)
// for a producer and Inbox(r) for a receiver (a spout task t's is
// Inbox(ReceiverOf(t))), so an engine written against the Port runs on
// an in-process acker or across netio alike, and *Acker needs no second
// name for either. In process they are always a *Producer and a
// *Receiver; what only the in-process receiver has, Run and Stats, is a
// type assertion away: a.Inbox(r).(*acker.Receiver).Run(fn). (A twin
// accessor returning the concrete type could not also satisfy the Port,
// Go's method sets having no covariant results; one name per role
// costs the assertion where Run or Stats is wanted.) The outcome queue
// netio's client shares with the harness is internal.
package acker
