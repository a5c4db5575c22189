// Package bench is xorack's benchmark harness: it replays the same steady
// workload through xorack and through every baseline, in one process,
// measures each, and checks that each gave every root the outcome the
// workload implies. cmd/ackbench is a thin command line over Run.
//
//	rep, err := bench.Run(bench.Config{Quick: true})
//	bench.WriteTable(os.Stdout, rep)   // also WriteJSON, WriteBenchfmt, WriteHTML
//	for _, why := range bench.Check(rep, bench.CheckFloor) { ... } // the gate -check runs
//
// A run is the cross product shapes x pending windows x levels x impls;
// each combination is a Row.
//
// # Levels
//
// core: messages go straight into one single-writer ackcore.Interface (the
// xorack shard, and gomap, mutexmap, xsync, storm, limit from
// bench/internal/baseline) on one goroutine, pinned to the CPU it starts
// on and counted by package perf. All impls of a window are built and warmed first, then
// measured in interleaved repetitions (A B C, B C A, ...), so that the
// VM's drift (up to 25% between sessions on a shared VM) falls on all of
// them alike; a row reports the median repetition.
//
// pipeline: producer goroutines -> SPSC rings -> pinned shard executors ->
// outcome rings -> spouts (acker.Acker). Beside it, the same shape
// built the obvious ways: "mutexmap", one baseline.MutexMap that every
// producer calls Apply on under its lock; "chanshard", one xorack shard on
// a goroutine fed by a Go channel of message blocks, answering through a
// channel per producer. All three are package bench/internal/pipeline's.
// Producer p replays its share of the stream's trees (slot mod
// producers) and is spout task p: it polls its own outcomes, as a Storm
// spout executor does. Impls run one after another (each wants every
// core); repetitions are consecutive segments of one run. BenchmarkAcker
// runs these rows as a Go benchmark (see Go benchmarks).
//
// topology (asked for by name; not in the default run): word count end to
// end on the reference engine (package topology), sentence spout -> split
// bolt -> count bolt, with one acker shard ("acked", or Config.Shards) and
// with AtMostOnce ("unacked", no acking), interleaved rep by rep. It
// makes its own sentences and runs once, not per shape and window; a rep
// emits a fixed number of sentences, sized from a warm-up run, timed from
// Start to Stop, and verified word by word (topology.go).
//
// source (asked for by name; not in the default run): the topology
// level's word count fed by the Kafka spout (package source/kafka) from a
// Kafka cluster in the process (kfake), acked ("kafka-acked": the spout
// commits only past sentences whose words were all counted) and at most
// once ("kafka-unacked": AtMostOnce), beside the in-memory spout's
// ("memory-acked", the baseline) and the JetStream spout's
// ("jetstream-acked"), interleaved rep by rep. The topic is loaded once;
// each rep reads all of it as a fresh consumer group, timed (wall clock
// and CPU) from its first record (the group join and first fetch noted
// apart) until every record is done and Stop has returned (the final
// commit included), and is verified word by word and by the committed
// offsets read back from the broker. -check gates each broker's records
// per second and per CPU-second over the in-memory spout's, the best rep
// pair of each (source.go).
//
// net: the pipeline's producers and spouts with the acker behind
// loopback TCP connections, one per producer (Config.Conns of them):
// "netio" (package netio's client and server, the server configured as
// cmd/ackerd runs it), "grpc" (the same acker behind one gRPC
// bidirectional stream per connection, the same 24-byte records, one
// stream message per producer batch) and "inproc" (the same acker in
// process: what the network adds is the difference). Every producer
// hands over Config.NetBatch messages at a time, SendBatch then Flush,
// whichever the impl; rows come from the pipeline's runner, so they are
// timed, loaded for latency and verified as pipeline rows are; the ratio
// column is to the netio row of the same connection count and batch
// (net.go, netgrpc.go).
//
// faults (asked for by name; not in the default run): the fault matrix,
// word count with fan-out on the reference engine under one injected
// fault per row (fail rates, drop, poison, slow, mixed, the breaker on,
// a tick-flushed join, a panicking bolt, a stop mid-run), described in
// faults.go.
//
// # Go benchmarks
//
// The package's Go benchmarks run the levels' own code under go test
// -bench, for profiling and benchstat; none is a rig of its own:
//
//   - BenchmarkAcker (pipeline_bench_test.go): the pipeline level, one
//     sub-benchmark a row (impl=NAME/shards=S/producers=N): the producers,
//     cursors and verification above (benchPipeline runs pipeRow), b.N
//     measured messages in one rep, the timer around them alone, no
//     latency run, on word count at P = 100,000. Per producer count
//     mutexmap and chanshard run first and every other row reports
//     x-mutexmap, its msgs/s over mutexmap's in the same run;
//   - BenchmarkTopology (topology_test.go) and BenchmarkSource
//     (source_test.go): the topology and source levels' word count, acked
//     and unacked;
//   - BenchmarkCursor (stream_test.go): a producer's cost per message,
//     with and without fault mode.
//
// Micro benchmarks of single parts live with them (ackcore's
// BenchmarkShard, ring, internal/timerwheel, netio); bench/internal/baseline's
// BenchmarkBaselines is a sanity run of the baselines, not the comparison.
// The pipeline rows, xorack beside its baselines:
//
//	go test -run '^$' -bench BenchmarkAcker ./bench/
//
// # Layout
//
// The workload is internal/acktest/workload's replayable stream: a prefix applied
// once, then a cycle replayed forever with about P roots pending. bench
// adds, once per stream, 8 bytes of meta per position (the tree slot, the
// message's index j in its tree, and whether it belongs to the tree the
// cycle starts or the one it finishes), which gives:
//
//   - shares: one producer's slots, in stream order (a copy, for more than
//     one producer; the stream itself at core level);
//   - round boundaries: every round holds each slot once, and a run ends
//     on one, so the roots emitted are exact (INITs in the prefix, in each
//     whole cycle, and in the rounds before the boundary);
//   - the drain: from a boundary, the next k rounds keep in round d only
//     messages with j > d, which finishes every tree started and starts
//     none.
//
// # Faults
//
// With a fail or drop rate a root leaves entries behind: the acks after a
// FAIL empty the drain it left (docs/semantics.md, rule 3: a FAIL carries
// the val of the ACK it replaces), or with Config.FailBare create orphans
// (rule 7), and a dropped root waits for its timeout. Replaying the same
// root ids would run into them, so in fault runs a faulted tree gets its
// own root id: generation g of slot i's tree has the key root_i ^
// salt(g), where salt is even (odd roots stay odd, never 0) and g is
// known from the cycle number and the head flag. Whether a slot's trees
// are failed, dropped or left alone, and which of their messages (never
// the INIT) becomes a FAIL or vanishes, follows from a hash of the slot,
// drawn once: the same trees of the stream are faulted in every
// generation, each under a root id the acker has never seen. A failed or
// dropped tree's messages carry its key as root id; a tree left alone
// keeps root_i, which no earlier generation still holds (they completed
// before its INIT). The counts of injected fails and drops are taken at
// each tree's INIT. What happens to each cycle position is a byte (its
// act), computed once with the fates, so that entering a cycle costs
// only its two salts; a pipeline producer sends a cycle straight from the
// share's memory and rewrites only the faulted messages on their way
// (cursor.span), while the core runner and the batched producers take a
// rewritten copy (cursor.block). At core level a fault run rewrites
// blocks of 16 batches outside the timed calls and times only Apply and
// Expire (Row.Timing "acker-calls"). Limit has no FAIL or timeouts and is
// left out of fault runs.
//
// Every core and pipeline fault row stands beside its fault-free twin,
// the same impl, level and window with no faults, in the same process
// (Row.FaultFreeRatio): a row and its twin are set up side by side and
// take turns rep by rep, the twin's rep just before the row's (at core
// level in the impls' rotation, at pipeline level through turns), and
// the ratio is the median of the reps' paired ratios. A twin differs from its row in the faults
// alone: the same stream clock, timeout and bound (runner.faultFree),
// and at core level the same timing, its blocks copied outside the
// timed calls as the fault row's are rewritten. Check holds xorack's to
// FaultFloor.
//
// # Time
//
// Runs without faults give each acker real time: at core level an
// activeClock, the wall clock stopped while other impls take their turn,
// so latency and timeouts count only the acker's own running time; at
// pipeline level the monotonic clock. The timeout defaults to 30 s, or 3
// µs per message of the cycle if longer (a tree lives one cycle; 1 M
// messages a second is slower than any acker here), so nothing times out.
//
// Fault runs, and their twins, give the acker a stream clock: 100 ns per
// message emitted, whatever the acker's speed. With drops or bare FAILs
// the default timeout is 4 cycles of stream time, so timeouts happen
// during the run, a correct root never times out, and the entries faults
// leave behind stay bounded for every impl (MaxPending gets room for
// them: faultHeadroom). With fails alone, whose drains leave nothing
// behind, it is the fault-free runs' (in stream time). A twin runs on its
// fault row's clock, timeout and bound, so the two differ in the faults
// alone (on the wall clock, a twin ran its timer wheel's passes several
// times less often than its row, at 40 M msgs/s). At the end of a fault
// run the clock skips 4 timeouts ahead and the acker expires what is
// left.
//
// Latency: at core level the acker's own Latency field (INIT to
// completion, 1 ms tick resolution for xorack and the wheel-based
// baselines, clock resolution for storm), sampled one batch in 16, and
// n/a in fault runs and their twins (stream time). At pipeline level, a second run offers
// LatencyLoad (half) of the measured peak, paced in quanta of 64 messages
// flushed at once, and each producer times every root from handing its
// last ACK to the pipe to polling its Completed from the spout ring
// (wall clock, HDR histogram, 3 significant digits).
//
// # Verification
//
// Every row checks itself after its drain: outcomes delivered equal roots
// emitted; Completed for every root not injected, Failed{explicit} for
// every failed tree, a timeout for every dropped one (storm reports none:
// its silently dropped INIT entries count), nothing refused, nothing
// failed for another reason, nothing left pending (core), and for impls
// with exact counters their Stats agree with what was delivered. A row
// that fails has Verified false, and Run's error wraps ErrVerification.
//
// # Measures
//
// msgs/s and trees/s (msgs/s over messages per tree); bytes per pending
// root (live heap growth from before the acker was made to after warm-up,
// two GCs each side, over the entries pending then; at core level the
// runtime is first given idle threads to spare, so that a thread it starts
// during the setup is not weighed with the acker; ackers that allocate
// for their bound show it, and fault runs raise the bound by the room
// their leftover entries need; at pipeline level rings count too); latency p50, p99,
// p99.9, max; GC cycles and pause total over the measured runs
// (runtime.MemStats); counters per message: at core level the perf
// Group of the runner's thread, started and stopped around the measured
// calls (hardware events read n/a on VMs without a PMU, never 0); at
// pipeline level the process's CPU time (getrusage) per message, since no
// one thread does the work.
//
// # Concurrency
//
// Run is synchronous and may be called from any goroutine; it runs the
// core level on a goroutine of its own (pinned and locked for perf) and
// the pipeline level's producers on theirs. Config.Progress is called
// from whichever goroutine is running the step, one call at a time. A
// producer's state belongs to its goroutine while a command runs; the
// runner reads it only after the producer's reply on its result channel.
// The stream and its meta are read-only once built.
//
// # Invariants
//
//   - A row's figures and its verification come from the same run.
//   - Rows of one level, shape and window ran against the same stream.
//   - An unavailable figure is null in JSON and n/a in tables, never 0.
//
// # Public surface
//
// What cmd/ackbench, or a program that runs the harness its own way,
// calls: Run with a Config (its levels, Default* values and floors), the
// Report it returns with its Rows, the writers and ReadJSON, and Check.
// The baselines and the pipeline level's pipes are bench/internal: the
// reports carry their figures, not their code. The harness's own probes
// and thresholds (the stall meter, the fault level's timeout) are
// unexported.
package bench
