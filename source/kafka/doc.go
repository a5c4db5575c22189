// Package kafka is a Kafka spout for the topology engine: a consumer group
// member (github.com/twmb/franz-go) that emits one root per record and
// commits, per partition, only the offset below which every record is
// done — storm-kafka-client's contract, with the traps its users hit
// closed (docs/semantics.md, "Sources"). A crash replays from the commit,
// so nothing is lost; instances in one group split the partitions, each
// with its own acker.
//
//	sp, err := kafka.New(kafka.Config{Brokers: addrs, Topics: []string{"sentences"}, Group: "wordcount",
//		DeadLetterTopic: "sentences-dlq"})
//	b := topology.NewBuilder()
//	b.Spout("records", func() topology.Spout { return sp }).Output(kafka.RecordField)
//	b.Bolt("split", newSplit).Input("records", topology.Shuffle()).Output("word")
//	...
//	cfg := topology.Config{}
//	cfg.Retry = topology.RetryPolicy{MaxAttempts: 5} // the engine replays; the spout never seeks
//
// A record's life: the poller fetches it into its partition's buffer;
// Next marks it emitted in the partition's offset tracker (package
// source/offsets) and emits it with an inflight entry as its message id;
// the engine replays failed attempts itself, with the values it kept; the
// final outcome comes back to Ack (the tree completed: done) or Fail
// (the last attempt failed: dead-lettered to Config.DeadLetterTopic, then
// done; or the topology stopped: not done, replayed by the next owner).
// The committer commits what the trackers offer every CommitInterval, on
// revocation and at Close. With topology.Config.AtMostOnce
// the engine acks each record as it is emitted, so its offset is committed
// whether or not the bolts got to it.
//
// Each commit carries the partition's done set in its metadata: the
// records done above the committed offset, encoded by the tracker
// (offsets.AppendDone) within Config.CommitMetadataBytes. On assignment
// the spout reads it back (OnOffsetsFetched) and marks those records done
// as they are fetched instead of emitting them (Stats.SkippedDone), so a
// crash replays only the records that had not finished, not everything
// above a record stuck in retries (docs/semantics.md, rule 18).
//
// The spout never calls SpoutCollector.Done: a topic has no end. A
// program that processes a bounded amount stops the topology once the
// group has committed every partition to its end (WaitCaughtUp, Lag).
//
// # Layout
//
// A Spout keeps one partition per topic-partition it has ever been
// assigned, and an inflight entry per record in flight:
//
//	partition  tr      *offsets.Tracker  done bits and runs of offsets; its committed offset
//	                                     is kept across assignments (it only rises)
//	           owned   bool              assigned to this member now
//	           paused  bool              fetching paused: tr is Full (MaxUncommitted)
//	           buf     []*kgo.Record     fetched, not yet emitted (from head on)
//
//	inflight   part    *partition        the message id the engine carries: a pointer,
//	           mark    offsets.Mark      so emitting boxes nothing; entries are recycled
//	           rec     *kgo.Record       through a free list once their outcome is in
//	           born    time.Duration     emit time (to a commit interval), to report a late outcome's age
//
// Fetched records wait in their partition's buffer, so a revocation can
// drop them with the partition and a paused partition's records do not
// block the others; Next serves the buffered partitions in turn. The
// poller polls while the buffers of partitions that are not paused hold
// less than two fetches' worth of bytes for the owned partitions
// (kgo.FetchMaxPartitionBytes each, at most kgo.FetchMaxBytes; a record
// counts its key, value and headers plus 256 bytes), and then takes what
// the client has buffered (MaxPollRecords a poll) while they stay under
// it, so the client fetches on. While a partition that is fetching and not
// caught up has an empty buffer, the poller takes up to four times the
// bound: the client returns a fetch's records partition after partition,
// and compressed records decode to many times the bytes fetched, so the
// starving partition's records are usually behind the others' in the
// client's fetch. Nothing fetched is dropped to serve another partition
// (a pause drops what the client fetched of the partition, to fetch and
// decode it again): past four times the bound a starving partition waits
// for Next to take the buffers down. A fetch asks for the wire bytes of
// a partition whose decoded records fill half the bound, from the decoded
// bytes per wire byte of what the spout has read (an eighth of
// kgo.FetchMaxPartitionBytes until it knows; at least 32 KiB, at most
// that setting): otherwise a fetch of small compressed records decodes
// to a hundred thousand records at once, all before the first is polled
// (Stats.FetchBytes). So the spout holds at most four
// times the bound plus a poll of records beyond those in
// flight (which topology.Config.MaxSpoutPending bounds) and, per
// partition, at most MaxUncommitted uncommitted records (the
// tracker's cap, after which the partition pauses).
//
// Transaction markers (the client is told to keep control records) are
// marked emitted and done at once: they are offsets the commit must pass,
// or a partition ending in a marker would never commit to its end.
// Records of aborted transactions are not fetched (read committed), and
// offsets missing for any reason are never waited for: contiguity is over
// the records fetched (STORM-2505).
//
// With Config.RecycleRecords the client decodes into batches from a pool
// of the spout's, and a record goes back to it once done (acked or
// dead-lettered, after the logs that name it); a batch is reused once its
// every record is back. A record left not done (stopped, revoked while
// buffered, its dead letter refused) is never recycled: its batch is the
// collector's, as without the option.
//
// The files follow those ideas, all acting on one table of partitions
// under Spout.mu: spout.go the spout, its state and the engine's side
// (Next, Ack, Fail); poll.go the poller and the buffers' bound; buffer.go
// a partition's buffer (a queue of blocks of records); group.go
// the consumer group's callbacks (assignment, the done set read back,
// revocation); commit.go choosing and sending commits; deadletter.go dead
// letters; broker.go the broker connection hooks; pool.go the client's
// pool of decoded batches (Config.RecycleRecords); config.go the Config;
// check.go the invariants build's checks; lag.go the group's lag;
// sink.go the sink bolt.
//
// # Concurrency
//
// Four kinds of goroutine touch a Spout:
//
//   - the spout executor calls Next, Ack and Fail (topology.Spout), one at
//     a time;
//   - the poller, started by Open, polls records and appends them to the
//     buffers;
//   - the committer, started by Open, commits every CommitInterval;
//   - the client's own goroutines run the group callbacks (assigned,
//     offsets fetched, revoked, lost), one at a time, and the dead-letter
//     produce promises.
//
// Spout.mu guards every partition, its tracker and buffer, the active
// list, the free list and the counters: each of the goroutines above takes
// it for what it reads or changes, and never across a request to the
// broker. The trackers are thus owned "under the owner's lock" as package
// offsets requires. Spout.commitMu serializes commits: whoever commits
// (the committer, the revocation callback, Close) holds it from choosing
// the offsets (under mu) until the broker's reply is applied to the
// trackers (under mu), so there is one committer at a time and its
// requests reach the broker in the order they were chosen (franz-go#689).
// Lock order: commitMu, then mu; Next, Ack and Fail take mu only, so the
// executor never waits for the broker.
//
// The client is built with BlockRebalanceOnPoll: from the moment a poll
// returns records until the poller calls AllowRebalance (right after it
// has put them in their buffers), no group callback runs. A record in a
// buffer therefore always belongs to the current assignment of its
// partition, and a revocation sees every record fetched for it. The
// revocation callback commits the revoked partitions' done offsets
// synchronously (the rebalance waits, at most CommitTimeout), then ends
// their trackers' generations: records in flight are dropped from
// tracking, their later outcomes are stale. Processing never holds a
// rebalance: a record whose tree outlives its partition's assignment is
// reported (Stats.Stale, a warning) and replayed by the partition's next
// owner (STORM-2494). Lost partitions (the member was fenced) are given up
// the same way, without a commit.
//
// Config and the client are immutable after Open; Stats may be called from
// any goroutine.
//
// # Invariants
//
//   - A commit never names an offset above a record emitted and not done
//     in the current generation: it is the tracker's NextCommit, taken
//     under mu. Records are done by their tree's completion, their dead
//     letter, or (transaction markers) at once; Fail with Reason Stopped
//     leaves a record not done (STORM-2343, STORM-2549: one stuck record
//     stops its own partition's commit only, and its retries come from the
//     engine, which fetching pauses do not stop).
//   - A record is counted done at most once per generation, and an outcome
//     for an earlier generation (the partition was revoked, lost or
//     reassigned since the record was emitted) changes nothing beyond
//     Stats.Stale (STORM-2104).
//   - The committed offset per partition only rises: the tracker offers
//     only offsets above it, commits are serialized, and a reply at or
//     below it is counted (Stats.LateCommits) and ignored.
//   - On assignment a partition starts at the greater of the group's
//     committed offset and the spout's own last commit (Stats.StartRaised
//     counts the times the latter won), and records fetched below the
//     start are not emitted (STORM-2666).
//   - A partition is paused exactly while its tracker is full; a revoked
//     partition is resumed, so a later assignment fetches it.
//   - Each record's attempts are counted by the engine from its first
//     emit until its final outcome (STORM-2352, STORM-2544): the spout
//     emits a record once per generation and never seeks.
package kafka
