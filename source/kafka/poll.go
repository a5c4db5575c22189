package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

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
	b := int(s.maxPartBytes) * max(1, len(s.active))
	if s.fetchBytes > 0 {
		b = min(b, int(s.fetchBytes))
	}
	return 2 * max(b, s.cfg.MaxPollRecords*(1<<10))
}

// Fetch sizing: the client asks for up to kgo.FetchMaxPartitionBytes of
// each partition on the wire, but the spout's buffers hold decoded records
// (recBytes), and small compressed records decode to ten or more times
// their wire bytes: a fetch of a megabyte a partition can hold a hundred
// thousand records, decoded all at once before the first is polled. So
// the spout asks for the wire bytes whose records fill half of byteBound
// (a fetch's worth), from the decoded bytes per wire byte of what it has
// read: firstInflation until it knows (the first fetch of a topic
// decodes no more than it must), at least minPartBytes, at most the
// client's setting. The partition order of a fetch rotates, so a batch
// larger than the ask still comes, first in some fetch.
const (
	firstInflation = 8
	minPartBytes   = 32 << 10
)

// sizeFetch sets the bytes a fetch asks for of one partition from the
// records read and taken so far (see firstInflation). Called with mu
// held, after a poll.
func (s *Spout) sizeFetch() {
	wire, recs := s.readBytes.Load(), s.readRecs.Load()
	if wire <= 0 || recs <= 0 || s.takenRecs <= 0 {
		return
	}
	// Decoded bytes per wire byte, per record on both sides (the batches
	// read run ahead of the records taken).
	inflation := float64(s.takenBytes) / float64(s.takenRecs) / (float64(wire) / float64(recs))
	want := float64(s.byteBound()) / 2 / float64(max(1, len(s.active))) / max(inflation, 1)
	b := int32(min(max(want, minPartBytes), float64(s.maxPartBytes)))
	if b < s.partBytes/2 || b > s.partBytes*2 || b == s.maxPartBytes {
		s.resizeFetch(b)
	}
}

// resizeFetch sets the bytes a fetch asks for of one partition. Called
// with mu held (or before the poller starts).
func (s *Spout) resizeFetch(b int32) {
	if b = min(b, s.maxPartBytes); b > 0 && b != s.partBytes {
		s.partBytes = b
		s.cl.UpdateFetchMaxBytes(s.fetchBytes, b)
	}
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
		s.sizeFetch()
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
		// One pass over the records, which the client decoded a while
		// ago: everything take needs of them is read here.
		b := 0
		for _, r := range fp.Records {
			n := recBytes(r)
			b += n
			p.buf.push(bufRec{rec: r, offset: r.Offset, bytes: n, control: r.Attrs.IsControl()}, &s.spare)
		}
		p.bytes += b
		s.takenRecs += int64(len(fp.Records))
		s.takenBytes += int64(b)
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
