package kafka

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/xorack/xorack/source/offsets"
)

// The group callbacks run on the client's group goroutine, one at a time,
// and (BlockRebalanceOnPoll) never while the poller holds polled records it
// has not yet put in their buffers.

// partFor returns tp's partition, making it on first assignment. Called
// with mu held.
func (s *Spout) partFor(t tp) *partition {
	p := s.parts[t]
	if p == nil {
		p = &partition{tp: t, tr: offsets.New(s.cfg.MaxUncommitted)}
		s.parts[t] = p
	}
	return p
}

// onAssigned takes ownership of newly assigned partitions. Their trackers
// begin a generation in adjust, once the start offset is known.
func (s *Spout) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	if s.crashed.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for topic, parts := range assigned {
		for _, part := range parts {
			p := s.partFor(tp{topic, part})
			if p.owned {
				continue
			}
			p.owned = true
			p.caughtUp = false
			s.active = append(s.active, p)
			s.stats.Assigned++
		}
	}
	s.check()
}

// onFetched reads the done set committed with each newly assigned
// partition's offset (rule 18): the records it names are done and are not
// emitted again. Metadata that is foreign (another client's, a member id),
// malformed, or for another offset than the one committed with it is
// ignored, counted and logged: the partition replays from its floor. It
// runs before adjust, on the group goroutine.
func (s *Spout) onFetched(ctx context.Context, cl *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	if s.crashed.Load() || s.cfg.CommitMetadataBytes < 0 {
		return nil
	}
	type got struct {
		t    tp
		off  int64
		meta string
	}
	var gs []got
	var ids [][16]byte
	for _, g := range resp.Groups {
		for _, rt := range g.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode == 0 && rp.Metadata != nil && *rp.Metadata != "" && rp.Offset >= 0 {
					gs = append(gs, got{tp{rt.Topic, rp.Partition}, rp.Offset, *rp.Metadata})
					ids = append(ids, rt.TopicID)
				}
			}
		}
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode == 0 && rp.Metadata != nil && *rp.Metadata != "" && rp.Offset >= 0 {
				gs = append(gs, got{tp{rt.Topic, rp.Partition}, rp.Offset, *rp.Metadata})
				ids = append(ids, [16]byte{})
			}
		}
	}
	names := s.topicNames(ctx, cl, ids)
	type bad struct {
		t   tp
		err error
	}
	var bads []bad
	s.mu.Lock()
	for i, g := range gs {
		if g.t.topic == "" {
			g.t.topic = names[ids[i]] // v10+: topics by id
		}
		if g.t.topic == "" {
			continue
		}
		p := s.partFor(g.t)
		d, err := offsets.ParseDone(g.meta)
		if err == nil && d.Floor != g.off {
			err = fmt.Errorf("kafka: done set for offset %d committed with offset %d", d.Floor, g.off)
		}
		if err != nil {
			p.skip = offsets.DoneSet{}
			s.stats.DoneSetIgnored++
			bads = append(bads, bad{g.t, err})
			continue
		}
		p.skip = d
	}
	s.mu.Unlock()
	for _, b := range bads {
		s.log.Warn("kafka: committed metadata is not this spout's done set; ignored, the partition replays from its committed offset",
			"group", s.cfg.Group, "topic", b.t.topic, "partition", b.t.partition, "err", b.err)
	}
	return nil
}

// topicNames maps the topic ids in ids to names, asking the cluster's
// metadata for the spout's topics when one is not known yet. Ids change
// only when a topic is re-created.
func (s *Spout) topicNames(ctx context.Context, cl *kgo.Client, ids [][16]byte) map[[16]byte]string {
	s.mu.Lock()
	names := s.ids
	missing := false
	for _, id := range ids {
		if id != ([16]byte{}) && names[id] == "" {
			missing = true
		}
	}
	s.mu.Unlock()
	if !missing {
		return names
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CommitTimeout)
	defer cancel()
	if err := s.refreshTopicIDs(ctx, cl); err != nil {
		s.log.Warn("kafka: topic ids not resolved; their done sets are not read", "group", s.cfg.Group, "err", err)
		return names
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids
}

// refreshTopicIDs asks the cluster's metadata for the spout's topics and
// keeps their ids both ways: OffsetFetch and OffsetCommit v10+ name
// topics by id. Ids change only when a topic is re-created.
func (s *Spout) refreshTopicIDs(ctx context.Context, cl *kgo.Client) error {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range s.cfg.Topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	names := make(map[[16]byte]string, len(resp.Topics))
	ids := make(map[string][16]byte, len(resp.Topics))
	for _, rt := range resp.Topics {
		if rt.Topic != nil && rt.ErrorCode == 0 {
			names[rt.TopicID] = *rt.Topic
			ids[*rt.Topic] = rt.TopicID
		}
	}
	s.mu.Lock()
	s.ids, s.idsByName = names, ids
	s.mu.Unlock()
	return nil
}

// adjust runs after the group's committed offsets are fetched and before
// fetching starts. Each partition starts at the greater of the group's
// committed offset (where fetching would start) and the offset this spout
// itself last committed: records below the latter are done and committed
// already, and a group offset behind it (an earlier commit that landed
// late, a stale read) would emit them again (STORM-2666). The partition's
// tracker begins a generation there, and learns the committed offset.
func (s *Spout) adjust(_ context.Context, offs map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	if s.crashed.Load() {
		return offs, nil
	}
	type raised struct {
		t             tp
		group, spouts int64
	}
	var rs []raised
	s.mu.Lock()
	for topic, parts := range offs {
		for part, o := range parts {
			p := s.partFor(tp{topic, part})
			at := o.EpochOffset().Offset // < 0: no commit, a relative reset (start, end)
			mine := p.tr.Stats().Committed
			start := at
			if mine >= 0 && mine > at {
				parts[part] = kgo.NewOffset().At(mine)
				start = mine
				s.stats.StartRaised++
				rs = append(rs, raised{p.tp, at, mine})
			}
			if start < 0 {
				p.tr.Revoke() // no generation: the first record fetched begins it (distribute)
				continue
			}
			p.tr.Assign(start)
			if at >= 0 {
				p.tr.Committed(at)
			}
		}
	}
	s.check()
	s.mu.Unlock()
	for _, r := range rs {
		s.log.Warn("kafka: group's committed offset is behind this spout's own commit; starting at the spout's", "group", s.cfg.Group,
			"topic", r.t.topic, "partition", r.t.partition, "group_offset", r.group, "spout_offset", r.spouts)
	}
	return offs, nil
}

// onRevoked commits the revoked partitions' done offsets and gives them
// up, holding the rebalance until the broker has answered (or
// CommitTimeout). Records of theirs in flight are dropped from tracking
// without committing past them: the commit names the lowest one not done,
// with the done set above it, so the new owner replays only what did not
// finish; their outcomes, when they come, are stale and dropped. Records
// done that the commit could not cover (it failed, or the done set read
// back at assignment was not all fetched again) are counted in
// Stats.RevokeUncommitted and logged: the new owner replays them too.
func (s *Spout) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	if s.crashed.Load() || len(revoked) == 0 {
		return
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.mu.Lock()
	c := newCommitSet(cl)
	var gone []*partition
	dropped := s.forEachOwned(revoked, func(p *partition) {
		s.choose(&c, p)
		gone = append(gone, p)
		s.release(cl, p)
		s.stats.Revoked++
	})
	s.check()
	s.mu.Unlock()
	err := s.send(ctx, cl, c)
	s.mu.Lock()
	var unsent uint64
	for _, p := range gone {
		unsent += p.tr.Stats().Done - p.sentDone
		p.sentDone = p.tr.Stats().Done // counted once
	}
	s.stats.RevokeUncommitted += unsent
	s.mu.Unlock()
	if unsent > 0 {
		s.log.Warn("kafka: partitions revoked with done records their commit did not cover; the next owner replays them",
			"group", s.cfg.Group, "partitions", revoked, "uncommitted_done", unsent, "dropped_in_flight", dropped, "err", err)
		return
	}
	s.log.Info("kafka: partitions revoked", "group", s.cfg.Group, "partitions", revoked, "dropped_in_flight", dropped, "committed", c.offs)
}

// onLost gives up partitions the member lost (the group fenced it: a
// session or rebalance timeout passed, an unknown member). A commit would
// be refused, so none is tried; the next owner starts from the last
// commit.
func (s *Spout) onLost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	if s.crashed.Load() || len(lost) == 0 {
		return
	}
	s.mu.Lock()
	dropped := s.forEachOwned(lost, func(p *partition) {
		s.release(cl, p)
		s.stats.Lost++
	})
	s.check()
	s.mu.Unlock()
	s.log.Warn("kafka: partitions lost", "group", s.cfg.Group, "partitions", lost, "dropped_in_flight", dropped)
}

// forEachOwned calls fn for each owned partition named in m and returns
// the records they had in flight. Called with mu held.
func (s *Spout) forEachOwned(m map[string][]int32, fn func(*partition)) int {
	dropped := 0
	for topic, parts := range m {
		for _, part := range parts {
			if p := s.parts[tp{topic, part}]; p != nil && p.owned {
				dropped += p.tr.Pending()
				fn(p)
			}
		}
	}
	return dropped
}

// release gives p up: its tracker's generation ends (records in flight
// dropped, their Marks stale), its buffer is emptied and, if it was
// paused, fetching it is resumed so that a later assignment fetches.
// Called with mu held.
func (s *Spout) release(cl *kgo.Client, p *partition) {
	if p.paused {
		p.paused = false
		s.stats.Paused--
	} else {
		s.buffered -= p.buffered()
		s.bufBytes -= p.bytes
	}
	if p.fetchPaused {
		p.fetchPaused = false
		cl.ResumeFetchPartitions(map[string][]int32{p.topic: {p.partition}})
	}
	s.clearBuf(p)
	p.skip = offsets.DoneSet{}
	s.stats.DroppedInFlight += uint64(p.tr.Pending())
	p.tr.Revoke()
	p.owned = false
	if i := slices.Index(s.active, p); i >= 0 {
		s.active = slices.Delete(s.active, i, i+1)
		if s.rr >= len(s.active) {
			s.rr = 0
		}
	}
	if s.held != nil && s.held.part == p {
		s.freeEntry(s.held) // its Mark is stale now; the next owner replays the record
		s.held = nil
	}
	s.wakePoller()
}
