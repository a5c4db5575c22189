package kafkatest

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/xorack/xorack/source/offsets"
)

// testTimeout bounds each broker test; a hung broker fails it rather than
// the whole run.
const testTimeout = 60 * time.Second

func checkLoopback(t *testing.T, hostports ...string) {
	t.Helper()
	for _, hp := range hostports {
		host, _, err := net.SplitHostPort(hp)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("broker address %q is not on 127.0.0.1 (%v)", hp, err)
		}
	}
}

func startCluster(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	k, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	checkLoopback(t, k.Addrs()...)
	return k
}

func newClient(t *testing.T, k *Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.Addrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes n records to each partition of topic, valued
// "partition/offset", and checks the offsets the broker assigned.
func produce(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partitions int32, from, n int64) {
	t.Helper()
	var recs []*kgo.Record
	for off := from; off < from+n; off++ {
		for p := range partitions {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%d/%d", p, off)})
		}
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	for _, r := range res {
		if want := fmt.Sprintf("%d/%d", r.Record.Partition, r.Record.Offset); string(r.Record.Value) != want {
			t.Fatalf("record %q landed at %s", r.Record.Value, want)
		}
	}
}

// consume polls until it has want records, failing on a fetch error or
// at the context's deadline.
func consume(ctx context.Context, t *testing.T, cl *kgo.Client, want int) []*kgo.Record {
	t.Helper()
	var got []*kgo.Record
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), want, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", topic, p, err)
		})
		got = append(got, fs.Records()...)
	}
	if len(got) != want {
		t.Fatalf("consumed %d records, want %d", len(got), want)
	}
	return got
}

// fetchCommitted reads the group's committed offsets back from the
// broker with an OffsetFetch request (not the client's own memory of what
// it committed).
func fetchCommitted(ctx context.Context, t *testing.T, cl *kgo.Client, group, topic string, partitions int32) map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("OffsetFetch: %v", err)
	}
	got := map[int32]int64{}
	topics := resp.Topics
	if len(resp.Groups) > 0 { // the batched (v8+) form
		for _, g := range resp.Groups {
			for _, gt := range g.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = gt.Topic
				for _, gp := range gt.Partitions {
					p := kmsg.NewOffsetFetchResponseTopicPartition()
					p.Partition, p.Offset, p.ErrorCode = gp.Partition, gp.Offset, gp.ErrorCode
					rt.Partitions = append(rt.Partitions, p)
				}
				topics = append(topics, rt)
			}
		}
	}
	for _, rt := range topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("OffsetFetch %s/%d: error code %d", rt.Topic, p.Partition, p.ErrorCode)
			}
			got[p.Partition] = p.Offset
		}
	}
	return got
}

// TestGroupCommit produces records, consumes them as a group member,
// marks them done in an offset tracker per partition with one record held
// back, commits what the trackers offer, reads the commit back from the
// broker, and checks that a new member of the group resumes exactly there.
func TestGroupCommit(t *testing.T) {
	const (
		topic      = "words"
		group      = "wordcount"
		partitions = 3
		perPart    = 10
		heldOff    = 4 // partition 0's record at this offset is never done
	)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	k := startCluster(t, Config{Topics: []string{topic}, Partitions: partitions})
	prod := newClient(t, k, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(ctx, t, prod, topic, partitions, 0, perPart)

	member := func() *kgo.Client {
		return newClient(t, k,
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	}
	cons := member()
	trackers := map[int32]*offsets.Tracker{}
	var marks []offsets.Mark
	var parts []int32
	for _, r := range consume(ctx, t, cons, partitions*perPart) {
		tr := trackers[r.Partition]
		if tr == nil {
			tr = offsets.New(100)
			tr.Assign(0)
			trackers[r.Partition] = tr
		}
		m, err := tr.Emit(r.Offset)
		if err != nil {
			t.Fatal(err)
		}
		marks, parts = append(marks, m), append(parts, r.Partition)
	}
	for i := len(marks) - 1; i >= 0; i-- { // done newest first
		if parts[i] == 0 && marks[i].Offset == heldOff {
			continue
		}
		if err := trackers[parts[i]].Done(marks[i]); err != nil {
			t.Fatal(err)
		}
	}
	commit := map[string]map[int32]kgo.EpochOffset{topic: {}}
	for p, tr := range trackers {
		off, ok := tr.NextCommit()
		if !ok {
			t.Fatalf("partition %d: nothing to commit", p)
		}
		commit[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: off}
	}
	var commitErr error
	cons.CommitOffsetsSync(ctx, commit, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				if p.ErrorCode != 0 && commitErr == nil {
					commitErr = fmt.Errorf("commit %s/%d: error code %d", rt.Topic, p.Partition, p.ErrorCode)
				}
			}
		}
	})
	if commitErr != nil {
		t.Fatal(commitErr)
	}
	want := map[int32]int64{0: heldOff, 1: perPart, 2: perPart}
	if got := fetchCommitted(ctx, t, prod, group, topic, partitions); !maps.Equal(got, want) {
		t.Fatalf("committed offsets read back: %v, want %v", got, want)
	}
	cons.Close() // leaves the group

	// A new member resumes from the commit: partition 0's records from the
	// held one on, then the record produced next on each partition.
	produce(ctx, t, prod, topic, partitions, perPart, 1)
	var got []string
	for _, r := range consume(ctx, t, member(), perPart-heldOff+partitions) {
		got = append(got, string(r.Value))
	}
	slices.Sort(got)
	wantRecs := []string{"0/10", "0/4", "0/5", "0/6", "0/7", "0/8", "0/9", "1/10", "2/10"}
	if !slices.Equal(got, wantRecs) {
		t.Fatalf("the new member consumed %q, want %q", got, wantRecs)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Brokers: -1}, "-1 Kafka brokers"},
		{Config{Brokers: MaxBrokers + 1}, "17 Kafka brokers"},
		{Config{Partitions: -2}, "-2 partitions"},
		{Config{Topics: []string{"a", ""}}, `empty topic name in ["a" ""]`},
	} {
		k, err := Start(c.cfg)
		if err == nil {
			k.Close()
			t.Errorf("Start(%+v) started", c.cfg)
			continue
		}
		if !strings.Contains(err.Error(), "kafkatest: "+c.want) {
			t.Errorf("Start(%+v): %v, want %q", c.cfg, err, c.want)
		}
	}
}
