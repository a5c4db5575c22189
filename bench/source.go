package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/xorack/xorack/source/brokertest"
	"github.com/xorack/xorack/source/kafka"
	"github.com/xorack/xorack/topology"
)

// The source level: the topology level's word count fed by the Kafka
// spout (package source/kafka) from a Kafka cluster in the process
// (kfake, package source/brokertest), with acking ("kafka-acked": one
// acker shard, or Config.Shards; the spout commits offsets only past
// sentences whose words were all counted) and at most once
// ("kafka-unacked": 0 ackers; the spout marks each record done as it
// emits it), interleaved rep by rep. The topic is loaded once; each rep
// reads it from the start as a fresh consumer group, and is timed from
// Start (which joins the group) until the spout has every record done and
// Stop has returned (the final commit and the group's leave included).
// trees/s counts records, msgs/s tuples executed by bolts. A rep is
// verified word by word, and by the group's committed offsets, read back
// from the broker, equalling the end offsets.

// sourceImpls are the source level's implementations, in run order.
var sourceImpls = []string{"kafka-acked", "kafka-unacked"}

// Source level constants.
const (
	// srcPartitions are the topic's partitions: a few, as a small topic
	// has, so the spout serves several.
	srcPartitions = 4
	// srcCalibrate is the records of the warm-up run that sizes the reps.
	srcCalibrate = 20_000
	// srcMaxRecords bounds a rep's records: the topic is held in memory by
	// the in-process cluster (about 100 bytes a record with its batch).
	srcMaxRecords = 5_000_000
)

// srcTopic is a loaded topic: its name and record count.
type srcTopic struct {
	name string
	n    int
}

// loadTopic creates a topic of n sentences (the corpus cycled), spread
// over srcPartitions partitions.
func loadTopic(k *brokertest.Kafka, corpus *wcCorpus, name string, n int) (srcTopic, error) {
	if err := k.Cluster().CreateTopic(name, srcPartitions, nil); err != nil {
		return srcTopic{}, fmt.Errorf("bench: creating topic %q: %w", name, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addrs()...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(1<<16))
	if err != nil {
		return srcTopic{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var firstErr atomic.Pointer[error]
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Topic: name, Value: []byte(corpus.sentences[i%wcSentences])}, func(_ *kgo.Record, err error) {
			if err != nil {
				firstErr.CompareAndSwap(nil, &err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return srcTopic{}, fmt.Errorf("bench: loading topic %q: %w", name, err)
	}
	if p := firstErr.Load(); p != nil {
		return srcTopic{}, fmt.Errorf("bench: loading topic %q: %w", name, *p)
	}
	return srcTopic{name: name, n: n}, nil
}

// runSource runs the word count over every record of topic as consumer
// group group.
func runSource(k *brokertest.Kafka, corpus *wcCorpus, topic srcTopic, group string, acked bool, shards int, pin bool, seed uint64) (wcResult, error) {
	sp, err := kafka.New(kafka.Config{
		Brokers: k.Addrs(), Topics: []string{topic.name}, Group: group,
		Values: func(r *kgo.Record) []any { return []any{string(r.Value)} },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return wcResult{}, err
	}
	var counters []*wcCount
	b := topology.NewBuilder()
	b.Spout("records", func() topology.Spout { return sp }).Output("sentence")
	b.Bolt("split", func() topology.Bolt { return wcSplit{} }).Input("records", topology.Shuffle()).Output("word")
	b.Bolt("count", func() topology.Bolt {
		c := &wcCount{counts: map[string]int{}}
		counters = append(counters, c)
		return c
	}).Input("split", topology.Fields("word"))
	cfg := topology.Config{Pin: pin, Seed: seed}
	if acked {
		cfg.Ackers = shards
	}
	top, err := b.Build(cfg)
	if err != nil {
		return wcResult{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	g0, cpu0, t0 := readGC(), processCPU(), time.Now()
	if err := top.Start(); err != nil {
		return wcResult{}, err
	}
	// Every record done: acked, each sentence's words counted; unacked,
	// emitted (Stop then delivers what is in flight).
	tick := time.NewTicker(time.Millisecond)
	for sp.Stats().Completed < uint64(topic.n) {
		select {
		case <-ctx.Done():
			tick.Stop()
			_ = top.Stop(context.Background())
			return wcResult{}, fmt.Errorf("bench: source level: %d of %d records done: %w", sp.Stats().Completed, topic.n, ctx.Err())
		case <-tick.C:
		}
	}
	tick.Stop()
	if err := top.Stop(ctx); err != nil {
		return wcResult{}, err
	}
	res := wcResult{d: time.Since(t0), cpu: processCPU() - cpu0, trees: int64(topic.n)}
	res.gc.add(g0, readGC())
	m := top.Metrics()
	res.tuples = int64(m.Component("split").Executed + m.Component("count").Executed)
	spm := m.Component("records")
	res.bound = spm.Bound
	if acked {
		res.lat = summarizeUs(spm.Latency)
	}
	got := map[string]int{}
	for _, c := range counters {
		for w, k := range c.counts {
			got[w] += k
		}
	}
	st := sp.Stats()
	switch want := corpus.want(topic.n); {
	case st.Emitted != uint64(topic.n) || st.Completed != uint64(topic.n):
		res.err = fmt.Errorf("%d records emitted, %d done, want %d", st.Emitted, st.Completed, topic.n)
	case res.tuples != int64(topic.n*(1+wcWords)):
		res.err = fmt.Errorf("%d tuples executed, want %d", res.tuples, topic.n*(1+wcWords))
	default:
		for w, k := range want {
			if got[w] != k {
				res.err = fmt.Errorf("word %q counted %d times, want %d", w, got[w], k)
				break
			}
		}
	}
	if res.err == nil {
		res.err = checkCommitted(ctx, k, group, topic)
	}
	return res, nil
}

// checkCommitted reads the group's committed offsets back from the broker
// and checks they are the topic's end offsets.
func checkCommitted(ctx context.Context, k *brokertest.Kafka, group string, topic srcTopic) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addrs()...))
	if err != nil {
		return err
	}
	defer cl.Close()
	lag, err := kafka.Lag(ctx, cl, group, topic.name)
	if err != nil {
		return err
	}
	var end int64
	for _, l := range lag {
		if l.Lag() != 0 { // an empty partition has no commit, and needs none
			return fmt.Errorf("partition %d committed %d, end %d", l.Partition, l.Committed, l.End)
		}
		end += l.End
	}
	if end != int64(topic.n) {
		return fmt.Errorf("end offsets sum to %d, want %d records", end, topic.n)
	}
	return nil
}

// sourceLevel runs the source level's rows.
func (rn *runner) sourceLevel() ([]Row, error) {
	c := rn.cfg
	names := c.impls[LevelSource]
	if len(names) == 0 {
		return nil, nil
	}
	corpus := newWCCorpus()
	pin := !c.NoPin
	k, err := brokertest.StartKafka(brokertest.KafkaConfig{})
	if err != nil {
		return nil, err
	}
	defer k.Close()
	rn.progress("source wordcount: warm-up and calibration")
	cal, err := loadTopic(k, corpus, "calibrate", srcCalibrate)
	if err != nil {
		return nil, err
	}
	calRes, err := runSource(k, corpus, cal, "calibrate", names[0] == "kafka-acked", c.Shards, pin, c.Seed)
	if err != nil {
		return nil, err
	}
	n := int(c.Msgs / int64(c.Reps))
	if c.Msgs == 0 {
		perRep := c.Duration / time.Duration(c.Reps)
		n = int(float64(calRes.trees) / calRes.d.Seconds() * perRep.Seconds())
	}
	n = min(max(n, 1000), srcMaxRecords)
	topic, err := loadTopic(k, corpus, "sentences", n)
	if err != nil {
		return nil, err
	}
	res := map[string][]wcResult{}
	for rep := range c.Reps {
		for _, name := range names {
			rn.progress("source wordcount: %s rep %d/%d", name, rep+1, c.Reps)
			r, err := runSource(k, corpus, topic, fmt.Sprintf("%s-%d", name, rep), name == "kafka-acked", c.Shards, pin, c.Seed+uint64(rep))
			if err != nil {
				return nil, err
			}
			res[name] = append(res[name], r)
		}
	}
	var rows []Row
	for _, name := range names {
		row := Row{Level: LevelSource, Impl: name, Shape: "wordcount", Pending: topology.DefaultMaxSpoutPending,
			Shards: c.Shards, Timing: "wall", Clock: "wall", TimeoutNs: int64(topology.DefaultMessageTimeout)}
		if name == "kafka-unacked" {
			row.Shards = 0
		}
		var treeRates []float64
		var cpu time.Duration
		var errs []string
		for _, r := range res[name] {
			row.RepMsgsPerSec = append(row.RepMsgsPerSec, float64(r.tuples)/r.d.Seconds())
			treeRates = append(treeRates, float64(r.trees)/r.d.Seconds())
			row.Msgs += r.tuples
			row.Seconds += r.d.Seconds()
			row.Roots += uint64(r.trees)
			cpu += r.cpu
			row.GCCycles += r.gc.cycles
			row.GCPauseNs += r.gc.pauseNs
			if r.err != nil {
				errs = append(errs, r.err.Error())
			} else {
				row.Completed += uint64(r.trees)
			}
		}
		row.MsgsPerSec = median(row.RepMsgsPerSec)
		row.TreesPerSec = median(treeRates)
		row.CountersPerMsg = (&counterSum{}).perMsg(0)
		if cpu >= 0 && row.Msgs > 0 {
			x := float64(cpu) / float64(row.Msgs)
			row.CountersPerMsg["task-clock-ns"] = &x
		}
		row.CounterScope = "process: CPU time of every thread (getrusage) over the reps, per tuple executed; the in-process Kafka cluster included"
		if name == "kafka-acked" {
			mid := res[name][len(res[name])/2].lat
			row.P50Ns, row.P99Ns, row.P999Ns, row.MaxNs, row.LatencyCount = mid.p50, mid.p99, mid.p999, mid.max, mid.count
			row.LatencySource = fmt.Sprintf("engine clock: spout emit to Ack, at full load (a queue of up to %d pending records), the middle rep",
				topology.DefaultMaxSpoutPending)
		}
		row.Verified = len(errs) == 0
		row.VerifyError = strings.Join(errs, "; ")
		rows = append(rows, row)
	}
	if a, u := findRow(rows, "kafka-acked"), findRow(rows, "kafka-unacked"); a != nil && u != nil && u.TreesPerSec > 0 {
		rn.rep.Notes = append(rn.rep.Notes, fmt.Sprintf("source: kafka-acked/kafka-unacked records/s = %.2f (%d records per rep, %d reps interleaved)",
			a.TreesPerSec/u.TreesPerSec, n, c.Reps))
	}
	return rows, nil
}
