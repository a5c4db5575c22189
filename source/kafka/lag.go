package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// PartitionLag is a consumer group's position in one partition, read from
// the brokers.
type PartitionLag struct {
	Topic     string
	Partition int32
	// Committed is the group's committed offset, -1 when it has none.
	Committed int64
	// End is the partition's last stable offset: the offset after the last
	// record a read-committed consumer can fetch (the high watermark when
	// no transaction is open).
	End int64
}

// Lag is End less the committed offset (less 0 when there is none).
func (l PartitionLag) Lag() int64 { return l.End - max(l.Committed, 0) }

// Lag returns the group's committed offset and the end offset of every
// partition of topics, sorted by topic and partition, as the brokers
// report them (Metadata, ListOffsets and OffsetFetch requests).
func Lag(ctx context.Context, cl *kgo.Client, group string, topics ...string) ([]PartitionLag, error) {
	if len(topics) == 0 {
		return nil, errors.New("kafka: Lag of no topics")
	}
	meta := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		meta.Topics = append(meta.Topics, rt)
	}
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("kafka: metadata of %q: %w", topics, err)
	}
	idx := map[tp]int{}
	var out []PartitionLag
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.ReplicaID = -1
	lo.IsolationLevel = 1 // read committed: the last stable offset
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = group
	for _, mt := range mresp.Topics {
		name := ""
		if mt.Topic != nil {
			name = *mt.Topic
		}
		if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
			return nil, fmt.Errorf("kafka: metadata of topic %q: %w", name, err)
		}
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = name
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic = name
		for _, mp := range mt.Partitions {
			idx[tp{name, mp.Partition}] = len(out)
			out = append(out, PartitionLag{Topic: name, Partition: mp.Partition, Committed: -1, End: -1})
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Partition = mp.Partition
			lp.Timestamp = -1 // the end
			lt.Partitions = append(lt.Partitions, lp)
			ft.Partitions = append(ft.Partitions, mp.Partition)
		}
		lo.Topics = append(lo.Topics, lt)
		of.Topics = append(of.Topics, ft)
	}
	lresp, err := lo.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("kafka: end offsets of %q: %w", topics, err)
	}
	for _, rt := range lresp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return nil, fmt.Errorf("kafka: end offset of %s/%d: %w", rt.Topic, rp.Partition, err)
			}
			if i, ok := idx[tp{rt.Topic, rp.Partition}]; ok {
				out[i].End = rp.Offset
			}
		}
	}
	fresp, err := of.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("kafka: committed offsets of group %q: %w", group, err)
	}
	if err := groupErr(fresp.ErrorCode); err != nil {
		return nil, fmt.Errorf("kafka: committed offsets of group %q: %w", group, err)
	}
	set := func(topic string, part int32, off int64, code int16) error {
		if err := kerr.ErrorForCode(code); err != nil {
			return fmt.Errorf("kafka: committed offset of group %q in %s/%d: %w", group, topic, part, err)
		}
		if i, ok := idx[tp{topic, part}]; ok {
			out[i].Committed = max(off, -1)
		}
		return nil
	}
	for _, rt := range fresp.Topics {
		for _, rp := range rt.Partitions {
			if err := set(rt.Topic, rp.Partition, rp.Offset, rp.ErrorCode); err != nil {
				return nil, err
			}
		}
	}
	for _, g := range fresp.Groups { // the batched form (OffsetFetch v8 and later)
		if err := groupErr(g.ErrorCode); err != nil {
			return nil, fmt.Errorf("kafka: committed offsets of group %q: %w", group, err)
		}
		for _, rt := range g.Topics {
			for _, rp := range rt.Partitions {
				if err := set(rt.Topic, rp.Partition, rp.Offset, rp.ErrorCode); err != nil {
					return nil, err
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b PartitionLag) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out, nil
}

// WaitCaughtUp polls Lag every interval until the group has committed
// every partition of topics up to its end, and returns nil then, or an
// error with the last lag seen when ctx ends. An interval that is not
// positive is an error naming it.
func WaitCaughtUp(ctx context.Context, cl *kgo.Client, group string, every time.Duration, topics ...string) error {
	if every <= 0 {
		return fmt.Errorf("kafka: WaitCaughtUp interval %v is not positive", every)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var last []PartitionLag
	var lastErr error
	for {
		last, lastErr = Lag(ctx, cl, group, topics...)
		if lastErr == nil && caughtUp(last) {
			return nil
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("kafka: group %q not caught up: %w (last error: %w)", group, ctx.Err(), lastErr)
			}
			return fmt.Errorf("kafka: group %q not caught up: %w; lag %v", group, ctx.Err(), last)
		case <-t.C:
		}
	}
}

// groupErr is the error for a group-level OffsetFetch code; a group that
// does not exist has no commits, which is no error.
func groupErr(code int16) error {
	if err := kerr.ErrorForCode(code); err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return err
	}
	return nil
}

func caughtUp(ls []PartitionLag) bool {
	for _, l := range ls {
		if l.Lag() != 0 {
			return false
		}
	}
	return len(ls) > 0
}
