package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/xorack/xorack/source/offsets"
)

func addOffset(offs map[string]map[int32]kgo.EpochOffset, t tp, off int64) {
	if offs[t.topic] == nil {
		offs[t.topic] = map[int32]kgo.EpochOffset{}
	}
	offs[t.topic][t.partition] = kgo.EpochOffset{Epoch: -1, Offset: off}
}

// commit commits, for every owned partition, the offset its tracker
// offers (never past a record not done, never at or below the committed
// offset).
func (s *Spout) commit(ctx context.Context) error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.mu.Lock()
	s.now = time.Since(s.start)
	c := newCommitSet(s.cl)
	for _, p := range s.active {
		s.choose(&c, p)
	}
	s.mu.Unlock()
	return s.send(ctx, s.cl, c)
}

// commitSet is one commit request being built: the member and generation
// it is built in, the offsets, each partition's done set (its metadata)
// and tracker Done count.
type commitSet struct {
	member string
	gen    int32
	offs   map[string]map[int32]kgo.EpochOffset
	meta   map[tp]string
	marks  map[tp]uint64
}

// newCommitSet starts a commit set in the member's current generation.
// Called with mu held, so that a partition lost (onLost, which takes mu)
// after it is chosen was chosen in the generation the commit names: the
// broker refuses that commit once the group has moved on, where one named
// by the generation current when it is sent would land over the next
// owner's commit.
func newCommitSet(cl *kgo.Client) commitSet {
	c := commitSet{offs: map[string]map[int32]kgo.EpochOffset{}}
	c.member, c.gen = cl.GroupMetadata()
	return c
}

// choose adds p to c when a commit is due: the floor rose, or (with a done
// set) records above it were done since the last accepted commit, which
// is committed again at the same offset with the new set, so a record
// stuck in retries does not make a crash replay all that finished after
// it (STORM-2343). Called with mu held.
//
// While the records of the done set read back at assignment are not all
// fetched again, no commit is made: the tracker knows only those fetched,
// and a commit would replace the set the broker holds with a smaller one.
func (s *Spout) choose(c *commitSet, p *partition) {
	if n := len(p.skip.Ranges); n > 0 {
		if p.tr.NextOffset() < p.skip.Ranges[n-1].Hi {
			return
		}
		p.skip = offsets.DoneSet{}
	}
	off, ok := p.tr.NextCommit()
	st := p.tr.Stats()
	if !ok && (s.cfg.CommitMetadataBytes < 0 || p.tr.Generation() == 0 || st.Done == p.sentDone || st.Committed != st.Committable) {
		return
	}
	addOffset(c.offs, p.tp, off)
	if c.marks == nil {
		c.meta, c.marks = map[tp]string{}, map[tp]uint64{}
	}
	c.marks[p.tp] = st.Done
	if s.cfg.CommitMetadataBytes < 0 {
		return
	}
	var complete bool
	s.meta, complete = p.tr.AppendDone(s.meta[:0], s.cfg.CommitMetadataBytes)
	c.meta[p.tp] = string(s.meta)
	if !complete {
		s.stats.DoneSetTruncated++
		if now := time.Now(); now.Sub(s.lastTruncLog) >= truncLogEvery {
			s.lastTruncLog = now
			s.log.Warn("kafka: done set does not fit Config.CommitMetadataBytes; the records past what fits replay after a crash",
				"group", s.cfg.Group, "topic", p.topic, "partition", p.partition, "budget", s.cfg.CommitMetadataBytes,
				"uncommitted", st.Uncommitted, "pending", st.Pending, "truncated_commits", s.stats.DoneSetTruncated)
		}
	}
}

// truncLogEvery bounds the log of done sets that do not fit to one line
// per ten seconds (the counter has them all).
const truncLogEvery = 10 * time.Second

// send commits c synchronously, as one OffsetCommit request to the group
// coordinator in the generation c was built in, and tells each
// partition's tracker what the broker accepted. Called with commitMu held.
//
// The request is built here rather than through the client's commit
// calls, which wait while the member joins and syncs: a rebalance can
// take seconds (the group waits for every member to rejoin), and the
// partitions this member keeps (cooperative-sticky) would go uncommitted
// meanwhile, so a crash then would replay them from before the rebalance.
// The broker takes a commit in the current generation while the group
// prepares a rebalance; it refuses one while the group completes it
// (RebalanceInProgress) or after the generation moved (IllegalGeneration):
// those are counted and committed again at the next interval, as any
// commit error. A partition is committed in a generation only by the
// member it is assigned to, so the refusal of an older generation keeps a
// commit from landing over the new owner's.
func (s *Spout) send(ctx context.Context, cl *kgo.Client, c commitSet) error {
	offs := c.offs
	if len(offs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CommitTimeout)
	defer cancel()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = s.cfg.Group
	req.MemberID, req.Generation = c.member, c.gen
	if v := cl.OptValues(kgo.InstanceID); len(v) == 2 && v[1] == true {
		id, _ := v[0].(string)
		req.InstanceID = &id
	}
	ids := s.topicIDs(ctx, cl, offs)
	for topic, parts := range offs {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = topic, ids[topic] // v10+ names the topic by id
		for part, eo := range parts {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = part, eo.Offset, -1
			// Every partition's metadata is the spout's: its done set,
			// or empty (never the client's default, the member id).
			m := c.meta[tp{topic, part}]
			rp.Metadata = &m
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	type result struct {
		t   tp
		err error
	}
	var results []result
	resp, reqErr := req.RequestWith(ctx, cl)
	if reqErr == nil {
		for _, rt := range resp.Topics {
			topic := rt.Topic
			if topic == "" {
				topic = s.topicName(rt.TopicID)
			}
			for _, rp := range rt.Partitions {
				results = append(results, result{tp{topic, rp.Partition}, kerr.ErrorForCode(rp.ErrorCode)})
			}
		}
	}
	var errs []error
	s.mu.Lock()
	if reqErr != nil {
		// A periodic commit that the spout's own Close cut short (it
		// ends s.ctx) is not an error: Close commits again.
		if !errors.Is(reqErr, context.Canceled) || s.ctx.Err() == nil {
			s.stats.CommitErrors++
		}
		errs = append(errs, fmt.Errorf("kafka: commit %v: %w", offs, reqErr))
	} else {
		s.stats.Commits++
	}
	for _, r := range results {
		off := offs[r.t.topic][r.t.partition].Offset
		if r.err != nil {
			s.stats.CommitErrors++
			if errors.Is(r.err, kerr.UnknownTopicID) {
				s.idsByName = nil // a topic re-created: ask again
			}
			errs = append(errs, fmt.Errorf("kafka: commit of %s/%d at %d (generation %d): %w", r.t.topic, r.t.partition, off, req.Generation, r.err))
			continue
		}
		p := s.parts[r.t]
		if p == nil {
			continue
		}
		if off == p.tr.Stats().Committed {
			// The same offset with a new done set: not late.
		} else if !p.tr.Committed(off) {
			s.stats.LateCommits++
			continue
		}
		p.sentDone = max(p.sentDone, c.marks[r.t])
	}
	s.mu.Unlock()
	err := errors.Join(errs...)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("kafka: commit failed; the offsets are committed again later, or replayed by the next owner", "group", s.cfg.Group, "err", err)
	}
	return err
}

// topicIDs returns the ids of the topics in offs, asking the cluster's
// metadata once (and again after a commit named an id the broker did not
// know). A topic whose id is unknown gets the zero id, which a broker
// that names topics by id refuses (counted as a commit error).
func (s *Spout) topicIDs(ctx context.Context, cl *kgo.Client, offs map[string]map[int32]kgo.EpochOffset) map[string][16]byte {
	s.mu.Lock()
	ids := s.idsByName
	s.mu.Unlock()
	for topic := range offs {
		if _, ok := ids[topic]; !ok {
			_ = s.refreshTopicIDs(ctx, cl) // on failure the commit names the zero id: refused and counted
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.idsByName
		}
	}
	return ids
}

// topicName returns the name of the topic with id, from the ids the
// commits were sent with; "" when unknown.
func (s *Spout) topicName(id [16]byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, x := range s.idsByName {
		if x == id {
			return name
		}
	}
	return ""
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
