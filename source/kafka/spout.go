package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/xorack/xorack/source/offsets"
	"github.com/xorack/xorack/topology"
)

// Header keys of a dead-letter record (besides the original record's own
// headers, which it keeps).
const (
	HeaderTopic     = "xorack-topic"     // the record's topic
	HeaderPartition = "xorack-partition" // its partition, decimal
	HeaderOffset    = "xorack-offset"    // its offset, decimal
	HeaderReason    = "xorack-reason"    // the last attempt's failure reason (topology.Reason)
	HeaderAttempts  = "xorack-attempts"  // the attempts made, decimal
	HeaderError     = "xorack-error"     // the last error, when there was one
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
	buf         []*kgo.Record    // fetched and not yet emitted, from head on
	head        int
	bytes       int // recBytes of buf[head:]
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

func (p *partition) buffered() int { return len(p.buf) - p.head }

// clearBuf drops the fetched records not yet emitted.
func (p *partition) clearBuf() {
	clear(p.buf)
	p.buf, p.head, p.bytes = p.buf[:0], 0, 0
}

// recOverhead is what a buffered record costs besides its key, value and
// headers: the kgo.Record and its slot in the buffer.
const recOverhead = 256

// recBytes is what a buffered record counts against the spout's byte
// bound (see byteBound).
func recBytes(r *kgo.Record) int {
	n := recOverhead + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
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

	// Set by Open, immutable after.
	cl     *kgo.Client
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
	opened        bool
	closed        bool
	stats         Stats
	meta          []byte              // the done set being encoded, reused
	ids           map[[16]byte]string // topic id to name, for OffsetFetch v10+
	idsByName     map[string][16]byte // topic name to id, for OffsetCommit v10+
	lastTruncLog  time.Time           // the last log of a done set that did not fit
	lastConnLog   time.Time           // the last log of a broker connection error

	// The client's fetch sizes (set by Open): a fetch asks for at most
	// fetchBytes in all and partBytes of each partition.
	fetchBytes, partBytes int32
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
	CommitErrors uint64 // commit requests that failed, or partitions in them the broker refused
	LateCommits  uint64 // accepted offsets at or below the committed offset already known (ignored)

	SkippedDone      uint64 // records fetched again that the committed done set named done: not emitted
	DoneSetTruncated uint64 // commits of a partition whose done set did not fit CommitMetadataBytes (the rest replays)
	DoneSetIgnored   uint64 // committed metadata read back that was foreign, malformed or for another offset: ignored

	Pauses  uint64 // times a partition's fetching was paused (its tracker full)
	Resumes uint64 // times it was resumed
	Paused  int    // gauge: partitions paused now

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
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Spout{cfg: cfg, log: cfg.Logger, parts: map[tp]*partition{}, start: time.Now()}, nil
}

// Open creates the client, joins the group and starts the poller and the
// committer. It implements topology.Opener.
func (s *Spout) Open(tc topology.TaskContext) error {
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
	s.partBytes, _ = cl.OptValue(kgo.FetchMaxPartitionBytes).(int32)
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
	if err := c.On(s.cfg.Stream).Emit(e, s.cfg.Values(e.rec)...); err != nil {
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
		for p.head < len(p.buf) {
			if p.tr.Full() {
				s.pause(p)
				break
			}
			r := p.buf[p.head]
			m, err := p.tr.Emit(r.Offset) // not ErrFull: checked above
			p.buf[p.head] = nil
			p.head++
			b := recBytes(r)
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
			if r.Attrs.IsControl() {
				_ = p.tr.Done(m) // m is current: Done cannot fail
				s.stats.Control++
				continue
			}
			if len(p.skip.Ranges) > 0 && p.skip.Contains(r.Offset) {
				_ = p.tr.Done(m) // done before the crash or rebalance, committed as done
				s.stats.SkippedDone++
				continue
			}
			if p.tr.Full() {
				s.pause(p)
			}
			s.stats.Emitted++
			s.wakePoller()
			return s.newEntry(p, m, r)
		}
		if p.head == len(p.buf) && p.head > 0 {
			p.clearBuf()
			s.hungry = true // a partition ran dry: poll for it
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
	if f == nil || f.Reason == topology.Stopped {
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
}

// finish marks e's record done (completed or dead-lettered) and recycles
// e. Called with mu held.
func (s *Spout) finish(e *inflight, dead bool) finished {
	rep := finished{rec: e.rec, born: e.born}
	p := e.part
	switch err := p.tr.Done(e.mark); {
	case err == nil:
		if dead {
			s.stats.DeadLettered++
		} else {
			s.stats.Completed++
		}
		if p.paused && !p.tr.Full() {
			s.resume(p)
		}
	case errors.Is(err, offsets.ErrStale):
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

// report logs a stale outcome (at 1, 2, 4, 8, ... of them: bounded).
func (s *Spout) report(rep finished) {
	if rep.stale != 0 && pow2(rep.stale) {
		s.log.Warn("kafka: outcome for a record whose partition was revoked since it was emitted (its processing outlived the assignment); dropped, the partition's owner replays it",
			"group", s.cfg.Group, "topic", rep.rec.Topic, "partition", rep.rec.Partition, "offset", rep.rec.Offset,
			"age", (time.Since(s.start) - rep.born).Round(time.Millisecond), "stale_outcomes", rep.stale)
	}
}

func (s *Spout) logDead(rep finished, f *topology.Failure, err error) {
	args := []any{"group", s.cfg.Group, "topic", rep.rec.Topic, "partition", rep.rec.Partition, "offset", rep.rec.Offset,
		"reason", f.Reason.String(), "attempts", f.Attempts}
	if f.Err != nil {
		args = append(args, "failure", f.Err.Error())
	}
	switch {
	case err != nil:
		s.log.Error("kafka: dead letter not delivered; the record is not done and its partition's commit stays below it",
			append(args, "dead_letter_topic", s.cfg.DeadLetterTopic, "err", err)...)
	case s.cfg.DeadLetterTopic != "":
		s.log.Error("kafka: record dead-lettered, counted as done", append(args, "dead_letter_topic", s.cfg.DeadLetterTopic)...)
	default:
		s.log.Error("kafka: record failed its last attempt, counted as done (no dead-letter topic)", args...)
	}
}

func (s *Spout) unknown() {
	s.mu.Lock()
	s.stats.UnknownIDs++
	s.mu.Unlock()
}

// deadLetter builds the dead-letter record for r.
func deadLetter(topic string, r *kgo.Record, f *topology.Failure) *kgo.Record {
	h := append(slices.Clip(r.Headers),
		kgo.RecordHeader{Key: HeaderTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: HeaderOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
		kgo.RecordHeader{Key: HeaderReason, Value: []byte(f.Reason.String())},
		kgo.RecordHeader{Key: HeaderAttempts, Value: strconv.AppendInt(nil, int64(f.Attempts), 10)},
	)
	if f.Err != nil {
		h = append(h, kgo.RecordHeader{Key: HeaderError, Value: []byte(f.Err.Error())})
	}
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: h}
}

// pause stops fetching p (its tracker is full). Called with mu held.
func (s *Spout) pause(p *partition) {
	if p.paused {
		return
	}
	p.paused = true
	s.buffered -= p.buffered()
	s.bufBytes -= p.bytes
	s.stats.Pauses++
	s.stats.Paused++
	s.syncFetch(p)
}

// syncFetch pauses or resumes fetching p in the client: paused while its
// tracker is full. Called with mu held.
func (s *Spout) syncFetch(p *partition) {
	if want := p.paused; want != p.fetchPaused {
		p.fetchPaused = want
		m := map[string][]int32{p.topic: {p.partition}}
		if want {
			s.cl.PauseFetchPartitions(m)
		} else {
			s.cl.ResumeFetchPartitions(m)
		}
	}
}

// resume fetches p again. Called with mu held.
func (s *Spout) resume(p *partition) {
	if !p.paused {
		return
	}
	p.paused = false
	s.buffered += p.buffered()
	s.bufBytes += p.bytes
	s.stats.Resumes++
	s.stats.Paused--
	s.syncFetch(p)
}

// wakePoller tells a waiting poller there is room, or a partition whose
// buffer ran dry. Called with mu held.
func (s *Spout) wakePoller() {
	if s.pollerWaiting && (s.bufBytes < s.byteBound() || s.hungry) {
		s.hungry = false
		s.pollerWaiting = false
		select {
		case s.room <- struct{}{}:
		default:
		}
	}
}

// byteBound is the recBytes of fetched records of unpaused partitions the
// spout takes from the client before it stops polling: two fetches' worth
// of its owned partitions (kgo.FetchMaxPartitionBytes each, at most
// kgo.FetchMaxBytes in all), and at least two polls of a kilobyte records.
// While a partition starves (see pollWanted) the poller takes up to
// starveBounds times it. Called with mu held.
func (s *Spout) byteBound() int {
	per := int(s.partBytes)
	if per <= 0 {
		per = 1 << 20
	}
	b := per * max(1, len(s.active))
	if s.fetchBytes > 0 {
		b = min(b, int(s.fetchBytes))
	}
	return 2 * max(b, s.cfg.MaxPollRecords*(1<<10))
}

// starveBounds is how many times byteBound the buffers may hold while a
// partition starves. A fetch asks for up to kgo.FetchMaxPartitionBytes of
// each partition on the wire, and compressed records of a few dozen bytes
// decode to ten or more times that (a record costs recOverhead besides its
// bytes), so one fetch can hold several bounds' worth of records. The
// client returns a fetch's records partition after partition and fetches
// again only once all of them are taken, so the records of the partitions
// last in a fetch are reached by taking those before them: the poller
// takes them rather than pause the partitions in front, which would drop
// what the client fetched of those, to fetch and decode it again.
const starveBounds = 4

// pollWanted reports whether the poller should poll now: the buffers hold
// less than byteBound; or less than starveBounds times it while an owned
// partition that is fetching and is not caught up has an empty buffer
// (its records are likely behind the others' in the client's fetch).
// Memory stays bounded: the poller takes at most a poll (MaxPollRecords)
// past starveBounds times byteBound, beyond which a starving partition
// waits for Next to take the buffers down. Called with mu held.
func (s *Spout) pollWanted() bool {
	lim := s.byteBound()
	if s.bufBytes < lim {
		return true
	}
	return s.bufBytes < starveBounds*lim && s.starving()
}

// starving reports whether an owned partition that is fetching and not
// caught up has an empty buffer. Called with mu held.
func (s *Spout) starving() bool {
	for _, p := range s.active {
		if !p.fetchPaused && p.buffered() == 0 && !p.caughtUp {
			return true
		}
	}
	return false
}

// poll runs on its own goroutine until Close: it polls records and puts
// them in their partitions' buffers. The client blocks rebalances from the
// moment a poll returns records until AllowRebalance, so the records are
// in their buffers, under the assignment that fetched them, before a
// revocation can run.
func (s *Spout) poll() {
	defer close(s.pollDone)
	for {
		s.mu.Lock()
		for !s.pollWanted() {
			s.pollerWaiting = true
			s.mu.Unlock()
			select {
			case <-s.room:
			case <-s.ctx.Done():
				return
			}
			s.mu.Lock()
			s.pollerWaiting = false
		}
		s.check()
		s.mu.Unlock()
		fs := s.cl.PollRecords(s.ctx, s.cfg.MaxPollRecords)
		s.mu.Lock()
		s.now = time.Since(s.start)
		errs := s.distribute(fs)
		// Take the rest of what the client holds while the poller would
		// poll again, so that it fetches on and drops nothing.
		for !fs.Empty() && s.pollWanted() && s.ctx.Err() == nil {
			s.mu.Unlock()
			//lint:ignore SA1012 a nil context returns what is buffered without waiting
			fs = s.cl.PollRecords(nil, s.cfg.MaxPollRecords)
			s.mu.Lock()
			errs = append(errs, s.distribute(fs)...)
		}
		s.check()
		s.mu.Unlock()
		s.cl.AllowRebalance()
		if s.ctx.Err() != nil {
			return
		}
		for _, err := range errs {
			s.log.Warn("kafka: fetch error", "group", s.cfg.Group, "err", err)
		}
	}
}

// distribute appends polled records to their partitions' buffers and
// returns the fetch errors to log. Called with mu held.
func (s *Spout) distribute(fs kgo.Fetches) []error {
	var errs []error
	fs.EachError(func(topic string, part int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
			return
		}
		s.stats.FetchErrors++
		errs = append(errs, fmt.Errorf("%s/%d: %w", topic, part, err))
	})
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if len(fp.Records) == 0 {
			return
		}
		n := uint64(len(fp.Records))
		s.stats.Fetched += n
		p := s.parts[tp{fp.Topic, fp.Partition}]
		if p == nil || !p.owned {
			s.stats.Skipped += n // cannot happen while rebalances wait for AllowRebalance
			return
		}
		if p.tr.Generation() == 0 {
			// The start was unknown at assignment (no commit, a reset
			// to a relative offset): the first record fetched is it.
			p.tr.Assign(fp.Records[0].Offset)
		}
		if p.head > 0 {
			// Move what is left to the front before appending, or a
			// buffer that never runs empty (Next kept waiting by the
			// pending bound) would grow without end.
			k := copy(p.buf, p.buf[p.head:])
			clear(p.buf[k:])
			p.buf, p.head = p.buf[:k], 0
		}
		p.buf = append(p.buf, fp.Records...)
		b := 0
		for _, r := range fp.Records {
			b += recBytes(r)
		}
		p.bytes += b
		if !p.paused {
			s.buffered += len(fp.Records)
			s.bufBytes += b
			s.peakBytes = max(s.peakBytes, s.bufBytes)
		}
		end := fp.HighWatermark // read committed: the last stable offset, when below
		if fp.LastStableOffset >= 0 && fp.LastStableOffset < end {
			end = fp.LastStableOffset
		}
		p.caughtUp = fp.Records[len(fp.Records)-1].Offset+1 >= end
	})
	return errs
}

// commitLoop commits done offsets every CommitInterval until Close.
func (s *Spout) commitLoop() {
	defer close(s.commitDone)
	t := time.NewTicker(s.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			_ = s.commit(s.ctx)
		case <-s.stopCommit:
			return
		}
	}
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

// brokerHooks counts and logs the client's broker connection errors (a
// kgo hook, called on the client's goroutines).
type brokerHooks struct{ s *Spout }

var _ kgo.HookBrokerConnect = brokerHooks{}
var _ kgo.HookBrokerDisconnect = brokerHooks{}

// connLogEvery bounds the log of connection errors to one line per ten
// seconds: a broker that is down is retried many times a second.
const connLogEvery = 10 * time.Second

func (h brokerHooks) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) ||
		strings.Contains(err.Error(), "operation was canceled") {
		return // the client is closing, not a broker's error
	}
	s := h.s
	s.mu.Lock()
	s.stats.ConnectErrors++
	s.stats.LastBrokerError = err.Error()
	n := s.stats.ConnectErrors
	now := time.Now()
	logIt := now.Sub(s.lastConnLog) >= connLogEvery
	if logIt {
		s.lastConnLog = now
	}
	s.mu.Unlock()
	if logIt {
		s.log.Warn("kafka: broker connection failed", "group", s.cfg.Group, "broker", net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port))),
			"err", err, "connect_errors", n)
	}
}

func (h brokerHooks) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) {
	h.s.mu.Lock()
	h.s.stats.Disconnects++
	h.s.mu.Unlock()
}

func (s *Spout) lastBrokerError() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats.LastBrokerError
}
