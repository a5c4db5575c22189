package kafka

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/xorack/xorack/source/offsets"
	"github.com/xorack/xorack/topology"
)

// RecordField is the one field the spout emits by default: the
// *kgo.Record itself (Config.Values changes that). Declare it on the
// spout: b.Spout("records", ...).Output(kafka.RecordField).
const RecordField = "record"

// Defaults for Config's zero fields.
const (
	// DefaultMaxUncommitted is the cap on uncommitted records per
	// partition (storm-kafka-client's maxUncommittedOffsets). 10,000 keeps
	// a partition busy through a stuck record for a few seconds at
	// typical rates, in a 2 KiB done ring.
	DefaultMaxUncommitted = 10_000
	// DefaultMaxPollRecords is the most records one poll takes (the Java
	// consumer's max.poll.records).
	DefaultMaxPollRecords = 500
	// DefaultCommitInterval is how often done offsets are committed: one
	// request for all of a spout's partitions, carrying their done sets. A
	// crash replays the records in flight plus those done since the last
	// commit, so the interval bounds the exposure: at 100 ms, with a
	// record stuck in a 10 s backoff, TestReplayBoundAcrossProcesses
	// measured 206-590 records replayed per SIGKILL against 1,363-2,525
	// with the done set off (CommitMetadataBytes -1; BENCHMARKS.md,
	// "Replays per kill"), ten requests a second per spout.
	DefaultCommitInterval = 100 * time.Millisecond
	// DefaultCommitTimeout bounds one commit request, the revocation
	// commit included (which holds the rebalance while it runs).
	DefaultCommitTimeout = 10 * time.Second
	// DefaultCommitMetadataBytes is the budget for the done set in each
	// commit's metadata: Kafka's default offset.metadata.max.bytes, 4,096
	// (a broker refuses a commit whose metadata is longer, so the spout
	// never sends one).
	DefaultCommitMetadataBytes = 4096
	// DefaultOpenTimeout bounds Open's first contact with the brokers: a
	// spout whose brokers do not answer fails to open with their reason
	// rather than run silently.
	DefaultOpenTimeout = 10 * time.Second
	// DefaultFetchMaxWait is how long a fetch waits for data on the
	// broker. Lower than franz-go's 5 s because a partition resumed after
	// a pause joins only the next fetch to its broker.
	DefaultFetchMaxWait = 250 * time.Millisecond
	// DefaultFetchMaxPartitionBytes is the most a fetch asks of one
	// partition when the client's options do not say (franz-go's default
	// for kgo.FetchMaxPartitionBytes).
	DefaultFetchMaxPartitionBytes = 1 << 20
)

// Config configures a Kafka spout. Brokers, Topics and Group are
// required; zero fields take the defaults above.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// Topics are consumed as one consumer group member.
	Topics []string
	// Group is the consumer group. Spouts in one group split the
	// partitions between them (each spout task is one member).
	Group string

	// MaxUncommitted caps each partition's uncommitted records (emitted,
	// at or above the committable offset). At the cap the partition's
	// fetching pauses until its lowest record is done.
	MaxUncommitted int
	// MaxPollRecords is the most records one poll takes. The spout
	// stops polling while its fetched records not yet emitted (of
	// partitions that are not paused) hold two fetches' worth of bytes
	// (see the package documentation), and holds at least two polls of
	// kilobyte records.
	MaxPollRecords int
	// CommitInterval is how often done offsets are committed.
	CommitInterval time.Duration
	// CommitTimeout bounds each commit request.
	CommitTimeout time.Duration
	// OpenTimeout bounds Open's first contact with the brokers (an
	// ApiVersions request to a seed broker); Open fails with the brokers'
	// reason (connection refused, TLS, SASL) when none answers within it.
	OpenTimeout time.Duration
	// CommitMetadataBytes is the budget, in bytes, for the done set each
	// commit carries in its metadata: the records done above the
	// committed offset, which the next owner skips instead of replaying
	// (offsets.AppendDone). Keep it at or below the brokers'
	// offset.metadata.max.bytes. 0 is DefaultCommitMetadataBytes. -1
	// turns the done set off: commits carry the offset alone and the
	// metadata read back at assignment is ignored, so a crash replays
	// everything at or above the committed floor (the spout's behaviour
	// before the done set). A set that does not fit covers what fits; the
	// rest is replayed, as with the offset alone (Stats.DoneSetTruncated).
	CommitMetadataBytes int

	// DeadLetterTopic, if set, receives each record whose last attempt
	// failed (the engine's Retry policy decides when that is), with
	// headers naming its origin and the failure; once the broker has it,
	// the record counts as done. Without it, a record whose last attempt
	// failed counts as done once the engine's Config.DeadLetter hook has
	// seen it. Either way it is counted and logged at error level.
	DeadLetterTopic string

	// Stream is the stream the spout emits on; default
	// topology.DefaultStream.
	Stream string
	// Values turns a record into the tuple's values; nil emits the record
	// itself (RecordField). It runs on the spout executor's goroutine, and
	// the engine keeps what it returns until the record's tree is done.
	Values func(*kgo.Record) []any

	// RecycleRecords gives the client a pool for the batches it decodes
	// (kgo.WithPools) and each record back to it (kgo.Record.Recycle) once
	// the record is done: its tree completed, or it was dead-lettered. A
	// fetched batch's record slice and decompressed bytes are then reused
	// by later fetches instead of left to the collector, once every record
	// of the batch is done (records dropped at a revocation or a pause
	// are left to the collector). The price is a promise: nothing uses a
	// record, its Key, Value or Headers, or a string or slice taken from
	// them without a copy, once its tree is done; no bolt keeps them past
	// its Ack, no topology.Config.DeadLetter hook past its return
	// (strings.Clone what you keep: a Go map with string keys
	// stores the key of every assignment, m[k]++ included, not only the
	// first). A Values that copies what it keeps keeps the promise by
	// itself. Open refuses it in an at-most-once topology, whose spout
	// hears Ack at emit, before the bolts read the record.
	RecycleRecords bool

	// Logger receives the spout's reports: dead letters (error), commit
	// failures, revocations, outcomes of revoked partitions (warn). Nil
	// means slog.Default().
	Logger *slog.Logger

	// Opts are further client options: TLS, SASL, balancers, session and
	// rebalance timeouts, fetch sizes (kgo.FetchMaxPartitionBytes and
	// kgo.FetchMaxBytes also size the spout's buffers; the spout asks for
	// less of a partition when its records decode to more than their
	// bytes fetched), a logger for the client. They are
	// applied before the options the spout relies on, which it sets
	// itself and which win: the consumer group and topics, the partition
	// callbacks and offset adjustment, DisableAutoCommit,
	// BlockRebalanceOnPoll and KeepControlRecords. By default the spout
	// reads committed records only (FetchIsolationLevel(ReadCommitted()))
	// with FetchMaxWait DefaultFetchMaxWait; Opts may change those two.
	Opts []kgo.Opt
}

// maxPollRecordsLimit is the most Config.MaxPollRecords may be.
const maxPollRecordsLimit = 1 << 20

// validate returns c with every zero field filled from its Default
// constant, or an error naming the field and the value.
func (c Config) validate() (Config, error) {
	if len(c.Brokers) == 0 {
		return c, errors.New("kafka: Config.Brokers is empty")
	}
	for _, b := range c.Brokers {
		if b == "" {
			return c, fmt.Errorf("kafka: empty broker address in Config.Brokers %q", c.Brokers)
		}
	}
	if len(c.Topics) == 0 {
		return c, errors.New("kafka: Config.Topics is empty")
	}
	for _, t := range c.Topics {
		if t == "" {
			return c, fmt.Errorf("kafka: empty topic in Config.Topics %q", c.Topics)
		}
		if t == c.DeadLetterTopic {
			return c, fmt.Errorf("kafka: Config.DeadLetterTopic %q is also consumed (Config.Topics %q)", t, c.Topics)
		}
	}
	if c.Group == "" {
		return c, errors.New("kafka: Config.Group is empty")
	}
	c.MaxUncommitted = cmp.Or(c.MaxUncommitted, DefaultMaxUncommitted)
	if c.MaxUncommitted < 1 || c.MaxUncommitted > offsets.MaxLimit {
		return c, fmt.Errorf("kafka: Config.MaxUncommitted %d out of range [1, %d]", c.MaxUncommitted, offsets.MaxLimit)
	}
	c.MaxPollRecords = cmp.Or(c.MaxPollRecords, DefaultMaxPollRecords)
	if c.MaxPollRecords < 1 || c.MaxPollRecords > maxPollRecordsLimit {
		return c, fmt.Errorf("kafka: Config.MaxPollRecords %d out of range [1, %d]", c.MaxPollRecords, maxPollRecordsLimit)
	}
	c.CommitInterval = cmp.Or(c.CommitInterval, DefaultCommitInterval)
	if c.CommitInterval < time.Millisecond {
		return c, fmt.Errorf("kafka: Config.CommitInterval %v below 1ms", c.CommitInterval)
	}
	c.CommitTimeout = cmp.Or(c.CommitTimeout, DefaultCommitTimeout)
	if c.CommitTimeout < time.Millisecond {
		return c, fmt.Errorf("kafka: Config.CommitTimeout %v below 1ms", c.CommitTimeout)
	}
	c.OpenTimeout = cmp.Or(c.OpenTimeout, DefaultOpenTimeout)
	if c.OpenTimeout < time.Millisecond {
		return c, fmt.Errorf("kafka: Config.OpenTimeout %v below 1ms", c.OpenTimeout)
	}
	switch {
	case c.CommitMetadataBytes == 0:
		c.CommitMetadataBytes = DefaultCommitMetadataBytes
	case c.CommitMetadataBytes == -1:
	case c.CommitMetadataBytes < offsets.MinDoneBudget || c.CommitMetadataBytes > offsets.MaxDoneText:
		return c, fmt.Errorf("kafka: Config.CommitMetadataBytes %d out of range [%d, %d] (or -1: none)",
			c.CommitMetadataBytes, offsets.MinDoneBudget, offsets.MaxDoneText)
	}
	if c.Stream == "" {
		c.Stream = topology.DefaultStream
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
