package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/source/offsets"
	"github.com/xorack/xorack/topology"
)

// tp names a topic-partition.
type tp struct {
	topic     string
	partition int32
}

// partition is the spout's state for one topic-partition it has been
// assigned at least once. Every field is guarded by Spout.mu.
type partition struct {
	tp
	tr          *offsets.Tracker // kept across assignments: its committed offset only rises
	owned       bool             // assigned to this member now
	paused      bool             // fetching paused because tr is Full
	fetchPaused bool             // the client is told not to fetch it (paused)
	buf         recQueue         // fetched and not yet emitted
	bytes       int              // recBytes of buf
	// caughtUp: the last poll brought the partition's records up to the
	// high watermark it reported: an empty buffer is no starvation.
	caughtUp bool

	// skip is the done set read back with the group's committed offset at
	// this assignment: records in it are done already and are marked
	// done, not emitted. Empty when there was none.
	skip offsets.DoneSet
	// sentDone is the tracker's Done count when its last accepted commit
	// was chosen: a commit is due when the floor moved or this did.
	sentDone uint64
}

func (p *partition) buffered() int { return p.buf.len() }

// clearBuf drops the fetched records not yet emitted.
func (s *Spout) clearBuf(p *partition) {
	p.buf.reset(&s.spare)
	p.bytes = 0
}

// inflight is a record emitted as a root: the spout's message id for it.
// Entries are recycled through Spout.free once the engine reports the
// record's final outcome.
type inflight struct {
	part *partition
	mark offsets.Mark
	rec  *kgo.Record
	born time.Duration // emit time, since Spout.start, to within a CommitInterval (Spout.now)
	next *inflight     // free list
}

// Spout is a Kafka consumer group member as a topology spout: one root per
// record, offsets committed only up to the lowest record not done. One
// Spout is one spout task; give a component several tasks for several
// members (each built with New). See the package documentation for its
// concurrency and invariants.
type Spout struct {
	cfg   Config
	log   *slog.Logger
	start time.Time // the clock inflight.born counts from
	vals  []any     // the default values' block, its unused slots (see values); the executor's goroutine only

	// Set by Open, immutable after.
	cl     *kgo.Client
	pool   *batchPool // Config.RecycleRecords: the client's pool
	task   int
	ctx    context.Context // canceled by Close: stops the poller, the committer and dead-letter produces
	cancel context.CancelFunc

	pollDone   chan struct{} // closed when the poller returns
	commitDone chan struct{} // closed when the committer returns
	stopCommit chan struct{} // closed to stop the committer
	room       chan struct{} // Next tells a waiting poller there is room (cap 1)
	crashed    atomic.Bool   // abandoned (tests): the callbacks do nothing
	stopOnce   sync.Once

	// commitMu serializes commits: the periodic committer, the revocation
	// callback and Close each hold it from choosing the offsets until the
	// broker's reply is applied, so there is one committer at a time and
	// its requests reach the broker in the order they were chosen. Taken
	// before mu, never while holding it.
	commitMu sync.Mutex

	// mu guards everything below, and every partition and tracker.
	mu            sync.Mutex
	parts         map[tp]*partition
	active        []*partition  // owned partitions, the order Next serves them in
	rr            int           // the next active partition to serve
	buffered      int           // records in the buffers of partitions not paused
	bufBytes      int           // their recBytes
	peakBytes     int           // the most bufBytes has been (tests)
	pollerWaiting bool          // the poller waits for room
	hungry        bool          // a partition's buffer ran dry since the poller last woke
	now           time.Duration // since start, as of the last poll or commit: a coarse clock for inflight.born
	held          *inflight     // emitted to the tracker, its Emit failed: emit it first
	free          *inflight
	spare         []*block // the buffers' emptied blocks, zeroed, for reuse
	opened        bool
	closed        bool
	stats         Stats
	meta          []byte              // the done set being encoded, reused
	ids           map[[16]byte]string // topic id to name, for OffsetFetch v10+
	idsByName     map[string][16]byte // topic name to id, for OffsetCommit v10+
	lastTruncLog  time.Time           // the last log of a done set that did not fit
	lastConnLog   time.Time           // the last log of a broker connection error

	// The client's fetch sizes (set by Open): a fetch asks for at most
	// fetchBytes in all and maxPartBytes of each partition (the client's
	// settings, which size byteBound), and partBytes of each partition
	// now (see sizeFetch).
	fetchBytes, maxPartBytes, partBytes int32
	// The records taken from the polls since Open, and their recBytes
	// (for sizeFetch).
	takenRecs, takenBytes int64
	// The records and wire bytes of the batches the client has read
	// (brokerHooks.OnFetchBatchRead; atomic: the client's goroutines).
	readRecs, readBytes atomic.Int64
}

// Stats are a spout's counters (since Open) and, in Partitions, the state
// of every partition it has been assigned.
type Stats struct {
	Fetched          uint64 // records polled, transaction markers included
	Emitted          uint64 // records emitted as roots
	Completed        uint64 // records whose tree completed: done
	DeadLettered     uint64 // records whose last attempt failed, done after their dead letter
	DeadLetterErrors uint64 // dead letters the broker did not take: their records are not done
	Stopped          uint64 // records failed with Reason Stopped at shutdown: not done, replayed by the next owner
	Stale            uint64 // outcomes for a record of a revoked partition or an earlier assignment: dropped
	Control          uint64 // transaction markers fetched: done at once, never emitted
	Skipped          uint64 // records fetched below their assignment's start or not above one emitted: not emitted
	EmitErrors       uint64 // emits the engine refused (the record is offered again)
	UnknownIDs       uint64 // Ack or Fail with a message id this spout did not make

	Commits      uint64 // commit requests the broker accepted
	CommitErrors uint64 // commit requests that failed (not one Close cut short: it commits again), or partitions in them the broker refused
	LateCommits  uint64 // accepted offsets at or below the committed offset already known (ignored)

	SkippedDone      uint64 // records fetched again that the committed done set named done: not emitted
	DoneSetTruncated uint64 // commits of a partition whose done set did not fit CommitMetadataBytes (the rest replays)
	DoneSetIgnored   uint64 // committed metadata read back that was foreign, malformed or for another offset: ignored

	Pauses     uint64 // times a partition's fetching was paused (its tracker full)
	Resumes    uint64 // times it was resumed
	Paused     int    // gauge: partitions paused now
	FetchBytes int32  // gauge: the bytes a fetch asks for of one partition now (see the package documentation)

	Assigned          uint64 // partitions assigned
	Revoked           uint64 // partitions revoked (their done offsets committed first)
	RevokeUncommitted uint64 // done records of revoked partitions their revocation commit did not cover (the next owner replays them; logged)
	Lost              uint64 // partitions lost (no commit possible)
	StartRaised       uint64 // assignments started at the spout's own committed offset, above the group's
	DroppedInFlight   uint64 // records in flight when their partition was revoked or lost
	FetchErrors       uint64 // fetch errors reported by the client

	ConnectErrors   uint64 // connections to a broker that failed (refused, timed out, TLS, SASL)
	Disconnects     uint64 // broker connections that closed
	LastBrokerError string // the last connection error, "" before any

	Partitions []PartitionStats // sorted by topic, then partition
}

// PartitionStats is one partition's state.
type PartitionStats struct {
	Topic     string
	Partition int32
	Owned     bool // assigned to this spout now
	Paused    bool // fetching paused: the tracker is full
	Buffered  int  // fetched, not yet emitted
	offsets.Stats
}

// New returns a spout for cfg, or an error naming a bad field. It connects
// nothing: Open (called by the topology before the first Next) creates the
// client and joins the group.
func New(cfg Config) (*Spout, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	return &Spout{cfg: cfg, log: cfg.Logger, parts: map[tp]*partition{}, start: time.Now()}, nil
}

// Open creates the client, joins the group and starts the poller and the
// committer. It implements topology.Opener.
func (s *Spout) Open(tc topology.TaskContext) error {
	if s.cfg.RecycleRecords && tc.Config().AtMostOnce {
		return fmt.Errorf("kafka: Config.RecycleRecords in an at-most-once topology (topology.Config.AtMostOnce) for group %q: its spout hears Ack at emit, before the bolts read the record", s.cfg.Group)
	}
	s.mu.Lock()
	if s.opened {
		s.mu.Unlock()
		return fmt.Errorf("kafka: spout of group %q opened twice", s.cfg.Group)
	}
	s.opened = true
	s.task = tc.Task
	s.mu.Unlock()

	opts := []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(DefaultFetchMaxWait)}
	opts = append(opts, s.cfg.Opts...)
	opts = append(opts,
		kgo.SeedBrokers(s.cfg.Brokers...),
		kgo.ConsumerGroup(s.cfg.Group),
		kgo.ConsumeTopics(s.cfg.Topics...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.KeepControlRecords(),
		kgo.OnPartitionsAssigned(s.onAssigned),
		kgo.OnPartitionsRevoked(s.onRevoked),
		kgo.OnPartitionsLost(s.onLost),
		kgo.AdjustFetchOffsetsFn(s.adjust),
		kgo.OnOffsetsFetched(s.onFetched),
		kgo.WithHooks(brokerHooks{s}),
	)
	if s.cfg.RecycleRecords {
		s.pool = &batchPool{}
		opts = append(opts, kgo.WithPools(s.pool))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka: client for group %q: %w", s.cfg.Group, err)
	}
	pctx, pcancel := context.WithTimeout(context.Background(), s.cfg.OpenTimeout)
	err = cl.Ping(pctx)
	pcancel()
	if err != nil {
		last := s.lastBrokerError()
		cl.Close()
		if last != "" && !strings.Contains(err.Error(), last) {
			err = fmt.Errorf("%w (last connection error: %s)", err, last)
		}
		return fmt.Errorf("kafka: no broker of %q answered within %v (Config.OpenTimeout) for group %q: %w",
			s.cfg.Brokers, s.cfg.OpenTimeout, s.cfg.Group, err)
	}
	s.mu.Lock()
	s.cl = cl
	s.fetchBytes, _ = cl.OptValue(kgo.FetchMaxBytes).(int32)
	s.maxPartBytes, _ = cl.OptValue(kgo.FetchMaxPartitionBytes).(int32)
	if s.maxPartBytes <= 0 {
		s.maxPartBytes = DefaultFetchMaxPartitionBytes
	}
	s.partBytes = s.maxPartBytes
	s.resizeFetch(max(minPartBytes, s.maxPartBytes/firstInflation))
	s.mu.Unlock()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.pollDone, s.commitDone = make(chan struct{}), make(chan struct{})
	s.stopCommit, s.room = make(chan struct{}), make(chan struct{}, 1)
	go s.poll()
	go s.commitLoop()
	return nil
}

// Next emits the next fetched record of an owned partition whose tracker
// has room, one per call, serving the partitions in turn. It never blocks
// on the broker: the poller fetches on its own goroutine.
func (s *Spout) Next(c *topology.SpoutCollector) {
	s.mu.Lock()
	e := s.held
	if e != nil {
		s.held = nil
		s.stats.Emitted++
	} else {
		e = s.take()
	}
	s.check()
	s.mu.Unlock()
	if e == nil {
		return
	}
	if err := c.On(s.cfg.Stream).Emit(e, s.values(e.rec)...); err != nil {
		s.mu.Lock()
		s.held = e
		s.stats.Emitted--
		s.stats.EmitErrors++
		n := s.stats.EmitErrors
		s.mu.Unlock()
		if pow2(n) {
			s.log.Error("kafka: the engine refused a record; it is offered again", "group", s.cfg.Group,
				"topic", e.rec.Topic, "partition", e.rec.Partition, "offset", e.rec.Offset, "err", err, "refusals", n)
		}
	}
}

// valBlock is how many records' default values (the record alone) one
// allocation holds.
const valBlock = 64

// values returns the tuple's values for r: Config.Values', or by default
// the record alone, cut from a block of valBlock slots (one allocation per
// valBlock records, never reused: the engine keeps the values until the
// record's tree is done, bolts may keep a tuple longer). A block stays
// reachable while any of its tuples is, so the default keeps at most
// valBlock-1 records alive beyond those the engine holds, per block it
// holds. Called on the executor's goroutine only (Next).
func (s *Spout) values(r *kgo.Record) []any {
	if s.cfg.Values != nil {
		return s.cfg.Values(r)
	}
	if len(s.vals) == 0 {
		s.vals = make([]any, valBlock)
	}
	v := s.vals[:1:1]
	s.vals = s.vals[1:]
	v[0] = r
	return v
}

// take picks the next record to emit and marks it emitted in its tracker;
// nil when there is none. Transaction markers are marked emitted and done
// on the way (they are offsets the commit must pass, not records). A
// partition whose tracker is full is paused. Called with mu held.
func (s *Spout) take() *inflight {
	for range len(s.active) {
		p := s.active[s.rr]
		if s.rr++; s.rr == len(s.active) {
			s.rr = 0
		}
		for p.buf.len() > 0 {
			if p.tr.Full() {
				s.pause(p)
				break
			}
			r := *p.buf.front()
			m, err := p.tr.Emit(r.offset) // not ErrFull: checked above
			if p.buf.pop(&s.spare) {
				s.hungry = true // a partition ran dry: poll for it
			}
			b := r.bytes
			p.bytes -= b
			s.buffered-- // p is not paused: paused partitions are full
			s.bufBytes -= b
			if err != nil {
				// Below the assignment's start (a reset below the
				// spout's own commit) or not above an offset already
				// emitted in this generation: done or tracked already.
				s.stats.Skipped++
				continue
			}
			if r.control {
				_ = p.tr.Done(m) // m is current: Done cannot fail
				s.stats.Control++
				continue
			}
			if len(p.skip.Ranges) > 0 && p.skip.Contains(r.offset) {
				_ = p.tr.Done(m) // done before the crash or rebalance, committed as done
				s.stats.SkippedDone++
				continue
			}
			if p.tr.Full() {
				s.pause(p)
			}
			s.stats.Emitted++
			s.wakePoller()
			return s.newEntry(p, m, r.rec)
		}
	}
	s.wakePoller()
	return nil
}

func (s *Spout) newEntry(p *partition, m offsets.Mark, r *kgo.Record) *inflight {
	e := s.free
	if e != nil {
		s.free = e.next
	} else {
		e = new(inflight)
	}
	*e = inflight{part: p, mark: m, rec: r, born: s.now}
	return e
}

func (s *Spout) freeEntry(e *inflight) {
	*e = inflight{next: s.free}
	s.free = e
}

// Ack marks the record done: its tree completed. It implements
// topology.Spout.
func (s *Spout) Ack(msgID any) {
	e, ok := msgID.(*inflight)
	if !ok {
		s.unknown()
		return
	}
	s.mu.Lock()
	rep := s.finish(e, false)
	s.check()
	s.mu.Unlock()
	s.report(rep)
}

// Fail handles a record the engine gave up on. With Reason Stopped (the
// topology is stopping) the record is left not done: the commit stays
// below it and whoever consumes the partition next replays it. Otherwise
// its last attempt failed: it is dead-lettered, then done.
func (s *Spout) Fail(msgID any, f *topology.Failure) {
	e, ok := msgID.(*inflight)
	if !ok {
		s.unknown()
		return
	}
	if f == nil || f.Reason == ackcore.ReasonStopped {
		s.mu.Lock()
		s.stats.Stopped++
		s.freeEntry(e)
		s.mu.Unlock()
		return
	}
	if s.cfg.DeadLetterTopic == "" {
		s.mu.Lock()
		rep := s.finish(e, true)
		s.check()
		s.mu.Unlock()
		s.logDead(rep, f, nil)
		s.report(rep)
		return
	}
	s.cl.Produce(s.ctx, deadLetter(s.cfg.DeadLetterTopic, e.rec, f), func(_ *kgo.Record, err error) {
		s.mu.Lock()
		var rep finished
		if err != nil {
			s.stats.DeadLetterErrors++
			rep = finished{rec: e.rec}
			s.freeEntry(e)
		} else {
			rep = s.finish(e, true)
		}
		s.check()
		s.mu.Unlock()
		s.logDead(rep, f, err)
		s.report(rep)
	})
}

// finished describes a finished entry for the logs, taken under mu.
type finished struct {
	rec   *kgo.Record
	stale uint64        // Stats.Stale after this outcome, if it was stale
	born  time.Duration // inflight.born
	done  bool          // the record is done (finish): nothing reads it again
}

// finish marks e's record done (completed or dead-lettered) and recycles
// e. Called with mu held.
func (s *Spout) finish(e *inflight, dead bool) finished {
	rep := finished{rec: e.rec, born: e.born}
	p := e.part
	switch err := p.tr.Done(e.mark); {
	case err == nil:
		rep.done = true
		if dead {
			s.stats.DeadLettered++
		} else {
			s.stats.Completed++
		}
		if p.paused && !p.tr.Full() {
			s.resume(p)
		}
	case errors.Is(err, offsets.ErrStale):
		rep.done = true
		s.stats.Stale++
		rep.stale = s.stats.Stale
	default:
		// A second outcome for one record: the engine gives one per
		// message, so this is a bug; the tracker refused it.
		s.log.Error("kafka: record done twice", "topic", p.topic, "partition", p.partition, "offset", e.mark.Offset, "err", err)
	}
	s.freeEntry(e)
	return rep
}

// report ends an outcome, after mu: it logs a stale one (at 1, 2, 4, 8,
// ... of them: bounded), then gives a done record back to the client's
// pool (Config.RecycleRecords), this being its last reader.
func (s *Spout) report(rep finished) {
	if rep.stale != 0 && pow2(rep.stale) {
		s.log.Warn("kafka: outcome for a record whose partition was revoked since it was emitted (its processing outlived the assignment); dropped, the partition's owner replays it",
			"group", s.cfg.Group, "topic", rep.rec.Topic, "partition", rep.rec.Partition, "offset", rep.rec.Offset,
			"age", (time.Since(s.start) - rep.born).Round(time.Millisecond), "stale_outcomes", rep.stale)
	}
	if s.cfg.RecycleRecords && rep.done { // after every log that reads the record (logDead's come before report)
		rep.rec.Recycle()
	}
}

func (s *Spout) unknown() {
	s.mu.Lock()
	s.stats.UnknownIDs++
	s.mu.Unlock()
}

// Close waits for the dead letters in flight, stops the poller and the
// committer, commits what is done, and leaves the group. The topology
// calls it after the spout's last Ack or Fail. It implements io.Closer.
func (s *Spout) Close() error {
	s.mu.Lock()
	if s.closed || !s.opened || s.cl == nil {
		s.closed = true
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	if s.crashed.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CommitTimeout)
	defer cancel()
	var errs []error
	if err := s.cl.Flush(ctx); err != nil {
		errs = append(errs, fmt.Errorf("kafka: flushing dead letters: %w", err))
	}
	s.stopBackground()
	if err := s.commit(context.Background()); err != nil {
		errs = append(errs, err)
	}
	s.cl.Close() // leaves the group: the revocation finds nothing more to commit
	return errors.Join(errs...)
}

// stopBackground stops the poller and the committer and waits for them.
func (s *Spout) stopBackground() {
	s.stopOnce.Do(func() {
		s.cancel()
		close(s.stopCommit)
		<-s.pollDone
		<-s.commitDone
	})
}

// Stats returns the spout's counters and its partitions' state. It may be
// called from any goroutine.
func (s *Spout) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.FetchBytes = s.partBytes
	st.Partitions = make([]PartitionStats, 0, len(s.parts))
	for _, p := range s.parts {
		st.Partitions = append(st.Partitions, PartitionStats{Topic: p.topic, Partition: p.partition,
			Owned: p.owned, Paused: p.paused, Buffered: p.buffered(), Stats: p.tr.Stats()})
	}
	slices.SortFunc(st.Partitions, func(a, b PartitionStats) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return st
}

// Client returns the spout's client once Open has run (nil before): for
// what a caller needs beyond the spout, such as the group's lag. Do not
// poll, commit, seek, pause or resume with it.
func (s *Spout) Client() *kgo.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cl
}

func pow2(n uint64) bool { return n != 0 && bits.OnesCount64(n) == 1 }
