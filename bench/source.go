package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/xorack/xorack/source/kafka"
	"github.com/xorack/xorack/source/kafka/kafkatest"
	"github.com/xorack/xorack/topology"
)

// The source level: the topology level's word count fed by the Kafka
// spout (package source/kafka) from a Kafka cluster in the process
// (kfake, package source/kafka/kafkatest), with acking ("kafka-acked": one
// acker shard, or Config.Shards; the spout commits offsets only past
// sentences whose words were all counted) and at most once
// ("kafka-unacked": AtMostOnce; the spout marks each record done as it
// emits it); beside them the same word count fed by the in-memory spout
// of the topology level ("memory-acked", the fixed baseline) and by the
// JetStream spout (package source/jetstream) from a NATS server in the
// process (package source/jetstream/jstest; "jetstream-acked"), all
// interleaved rep by rep. A topic or stream is loaded once per size; each
// Kafka rep reads the topic from the start as a fresh consumer group, each
// JetStream rep the stream through a fresh durable consumer. Every row's
// rep is timed from the first record a split bolt takes until the spout
// has every record done and Stop has returned (the final commit and the
// group's leave included): the startup before the first record (a Kafka
// spout's client, group join and first fetch, 30-60 ms, a few percent of
// a rep, and 25-40 ms of CPU; the in-memory spout's well under a
// millisecond) is a cost paid once per Start, not per record, so it is
// left out of every row's records/s and CPU per tuple alike and noted
// apart per row (its wall time, mean and max, and its CPU time). trees/s
// counts records, msgs/s tuples executed by bolts. A rep is verified word
// by word; a Kafka rep also by the group's committed offsets, read back
// from the broker, equalling the end offsets, a JetStream rep by the
// consumer's ack floor at the stream's last message with nothing pending.
//
// The level's notes divide each broker's acked records/s by the in-memory
// spout's sentences/s of the same run (Row.BaselineRatio, the median
// reps), and each rep's records/s and records per CPU-second by the
// in-memory spout's rep beside it (the reps take turns, so each pair ran
// side by side): the best pair of each is Row.WallBestRatio and
// Row.CPURatio, which Check fails below SourceFloor (kafka-acked) or
// JetStreamFloor (jetstream-acked). A regression in a spout shows there
// even when every row of the run moved together. Other processes on the
// machine spoil single reps (in five -quick runs on a busy two-core
// machine, kafka-acked's median-rep ratio ranged 0.62-1.08); a regression
// lowers every pair, noise some, so the gate reads the best pair. It
// reads both clocks: CPU time shows work that a busy machine hides in the
// wall clock, and the wall clock shows work on a thread that would
// otherwise idle (the executors spin and yield while they wait, so CPU
// added to the spout's thread replaces its idling and hardly moves the
// process's CPU per record).

// sourceImpls are the source level's implementations, in run order.
var sourceImpls = []string{"kafka-acked", "kafka-unacked", srcBaseline, "jetstream-acked"}

// srcBaseline is the source level's in-memory row: the baseline the
// brokers' rows are divided by.
const srcBaseline = "memory-acked"

// SourceFloor is the least kafka-acked/memory-acked ratio, of records
// per second and of records per CPU-second (the best rep pair of each:
// Row.WallBestRatio, Row.CPURatio), Check accepts on the source level.
const SourceFloor = 0.8

// JetStreamFloor is the least jetstream-acked/memory-acked ratio of the
// same figures Check accepts on the source level. The JetStream row
// spends most of its CPU in the NATS server (a pull request and an ack per
// message), so it runs at a fifth of the in-memory spout (0.16-0.25 of its
// records/s on two cores, 0.23-0.34 of its records per CPU-second); the
// floor fails it at half to a third of that.
const JetStreamFloor = 0.1

// sourceFloor returns the Check floor of a source row's BaselineRatio, 0
// for a row without one.
func sourceFloor(impl string) float64 {
	switch impl {
	case "kafka-acked":
		return SourceFloor
	case "jetstream-acked":
		return JetStreamFloor
	}
	return 0
}

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
	// srcMinRecords is a rep's fewest records, so that joining the group
	// (a few milliseconds) stays small beside the rep even in a -quick
	// run, whose ratio CI gates.
	srcMinRecords = 30_000
)

// srcTopic is a loaded topic: its name and record count.
type srcTopic struct {
	name string
	n    int
}

// loadTopic creates a topic of n sentences (the corpus cycled), spread
// over srcPartitions partitions.
func loadTopic(k *kafkatest.Cluster, corpus *wcCorpus, name string, n int) (srcTopic, error) {
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
func runSource(k *kafkatest.Cluster, corpus *wcCorpus, topic srcTopic, group string, acked bool, shards int, pin bool, seed uint64) (wcResult, error) {
	sp, err := kafka.New(kafka.Config{
		Brokers: k.Addrs(), Topics: []string{topic.name}, Group: group,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		// Acked, each record goes back to the client's pool once its
		// words are counted (the count bolt copies the words it keeps);
		// at most once the spout is acked at emit, before the split.
		RecycleRecords: acked,
	})
	if err != nil {
		return wcResult{}, err
	}
	w, err := buildWordcount("records", func() topology.Spout { return sp }, acked, shards, pin, seed)
	if err != nil {
		return wcResult{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := w.start(); err != nil {
		return wcResult{}, err
	}
	// Every record done: acked, each sentence's words counted; unacked,
	// emitted (Stop then delivers what is in flight).
	tick := time.NewTicker(time.Millisecond)
	for sp.Stats().Completed < uint64(topic.n) {
		select {
		case <-ctx.Done():
			tick.Stop()
			_ = w.top.Stop(context.Background())
			return wcResult{}, fmt.Errorf("bench: source level: %d of %d records done: %w", sp.Stats().Completed, topic.n, ctx.Err())
		case <-tick.C:
		}
	}
	tick.Stop()
	if err := w.top.Stop(ctx); err != nil {
		return wcResult{}, err
	}
	res := w.result(corpus, topic.n)
	st := sp.Stats()
	res.fetch.pauses, res.fetch.commits = st.Pauses, st.Commits
	if res.err == nil && (st.Emitted != uint64(topic.n) || st.Completed != uint64(topic.n)) {
		res.err = fmt.Errorf("%d records emitted, %d done, want %d", st.Emitted, st.Completed, topic.n)
	}
	if res.err == nil {
		res.err = checkCommitted(ctx, k, group, topic)
	}
	return res, nil
}

// sentence is t's sentence: a string (the in-memory spout), or the value
// of a Kafka record (the Kafka spout emits the record itself, its
// default), read in place without a copy. The words, substrings of it,
// live until the record is done: kafka-acked runs the spout with
// RecycleRecords, which gives the record's batch back to the client for
// reuse once its every record's tree is done, so the count bolt copies
// each word it keeps as a key (wcCount). At most once (kafka-unacked) the
// spout recycles nothing and the value never changes.
func sentence(t *topology.Tuple) string {
	switch v := t.Value(0).(type) {
	case string:
		return v
	case *kgo.Record:
		return unsafe.String(unsafe.SliceData(v.Value), len(v.Value))
	}
	return ""
}

// checkCommitted reads the group's committed offsets back from the broker
// and checks they are the topic's end offsets.
func checkCommitted(ctx context.Context, k *kafkatest.Cluster, group string, topic srcTopic) error {
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

// ratioList formats ratios for a note.
func ratioList(rs []float64) string {
	txt := make([]string, len(rs))
	for i, x := range rs {
		txt[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(txt, " ")
}

// sourceLevel runs the source level's rows.
func (rn *runner) sourceLevel() ([]Row, error) {
	c := rn.cfg
	names := c.impls[LevelSource]
	if len(names) == 0 {
		return nil, nil
	}
	corpus := newWCCorpus()
	var k *kafkatest.Cluster
	var js *jsSource
	defer func() {
		if k != nil {
			k.Close()
		}
		if js != nil {
			js.close()
		}
	}()
	for _, name := range names {
		var err error
		switch {
		case strings.HasPrefix(name, "kafka-") && k == nil:
			k, err = kafkatest.Start(kafkatest.Config{})
		case name == "jetstream-acked" && js == nil:
			js, err = startJetStream()
		}
		if err != nil {
			return nil, err
		}
	}
	topics := map[int]srcTopic{} // by records: the warm-up's, the reps'
	type fetchSum struct {
		pauses, commits uint64
		secs            float64
	}
	fetch := map[string]*fetchSum{}
	type startSum struct {
		n        int
		sum, max time.Duration
	}
	startup := map[string]*startSum{}
	cpuStartup := map[string]time.Duration{} // summed over the timed reps
	// repWall and repCPU are each row's records per second and per
	// CPU-second, rep by rep (the reps of the rows take turns, so the
	// i-th of each ran side by side).
	repWall, repCPU := map[string][]float64{}, map[string][]float64{}
	run := func(name string, rep, n int) (wcResult, error) {
		seed := c.Seed + uint64(max(rep, 0))
		switch name {
		case srcBaseline:
			return runWordcount(corpus, n, true, c.Shards, !c.NoPin, seed)
		case "jetstream-acked":
			return js.run(corpus, n, rep, c.Shards, !c.NoPin, seed)
		}
		t, ok := topics[n]
		if !ok {
			var err error
			if t, err = loadTopic(k, corpus, fmt.Sprintf("sentences-%d", n), n); err != nil {
				return wcResult{}, err
			}
			topics[n] = t
		}
		r, err := runSource(k, corpus, t, fmt.Sprintf("%s-%d", name, rep), name == "kafka-acked", c.Shards, !c.NoPin, seed)
		if err == nil && rep >= 0 {
			f := fetch[name]
			if f == nil {
				f = &fetchSum{}
				fetch[name] = f
			}
			f.pauses += r.fetch.pauses
			f.commits += r.fetch.commits
			f.secs += r.d.Seconds()
		}
		return r, err
	}
	rows, err := rn.wordcountLevel(wcLevel{
		level: LevelSource, label: "source wordcount", acked: "kafka-acked", unacked: "kafka-unacked",
		others: []string{srcBaseline, "jetstream-acked"}, calibrate: srcCalibrate, minN: srcMinRecords, maxN: srcMaxRecords,
		run: func(name string, rep, n int) (wcResult, error) {
			r, err := run(name, rep, n)
			if err == nil && r.err == nil {
				// Every row is timed from its first record (see the
				// level's documentation); its startup is noted apart.
				r.d -= r.startup
				r.cpu -= r.cpuStartup
				if rep >= 0 {
					cpuStartup[name] += r.cpuStartup
					repWall[name] = append(repWall[name], float64(r.trees)/r.d.Seconds())
					cpuRate := math.NaN() // no figure: no CPU clock here (pairRatios leaves the rep out)
					if r.cpu > 0 {
						cpuRate = float64(r.trees) / r.cpu.Seconds()
					}
					repCPU[name] = append(repCPU[name], cpuRate)
					s := startup[name]
					if s == nil {
						s = &startSum{}
						startup[name] = s
					}
					s.n++
					s.sum += r.startup
					s.max = max(s.max, r.startup)
				}
			}
			return r, err
		},
		unit:    "records",
		scope:   "process: CPU time of every thread (getrusage) over the reps from each rep's first record, per tuple executed; the in-process broker included (none for memory-acked)",
		ratioOf: "source: kafka-acked/kafka-unacked records/s",
	})
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if f := fetch[name]; f != nil && f.secs > 0 {
			rn.rep.Notes = append(rn.rep.Notes, fmt.Sprintf("source: %s spout per second: %.1f partitions paused at the uncommitted cap (their fetched records dropped and fetched again), %.1f commits",
				name, float64(f.pauses)/f.secs, float64(f.commits)/f.secs))
		}
	}
	for _, name := range names {
		if st := startup[name]; st != nil {
			rn.rep.Notes = append(rn.rep.Notes, fmt.Sprintf("source: %s startup (Start to the first record split, not in its records/s nor its CPU per tuple): mean %.1f ms, max %.1f ms, CPU %.1f ms per rep, over %d reps",
				name, float64(st.sum.Microseconds())/1e3/float64(st.n), float64(st.max.Microseconds())/1e3,
				float64(cpuStartup[name].Microseconds())/1e3/float64(st.n), st.n))
		}
	}
	var base *Row
	for i := range rows {
		if rows[i].Impl == srcBaseline {
			base = &rows[i]
		}
	}
	if base == nil || base.TreesPerSec <= 0 {
		return rows, nil
	}
	for i := range rows {
		r := &rows[i]
		if r.Impl == "kafka-acked" || r.Impl == "jetstream-acked" {
			r.BaselineRatio = r.TreesPerSec / base.TreesPerSec
			rn.rep.Notes = append(rn.rep.Notes, fmt.Sprintf("source: %s records/s / %s sentences/s = %.2f (same run, wall clock)",
				r.Impl, srcBaseline, r.BaselineRatio))
			wall, cpu := pairRatios(repWall[r.Impl], repWall[srcBaseline]), pairRatios(repCPU[r.Impl], repCPU[srcBaseline])
			if len(wall) == 0 || len(cpu) == 0 {
				continue
			}
			r.WallBestRatio, r.CPURatio = slices.Max(wall), slices.Max(cpu)
			rn.rep.Notes = append(rn.rep.Notes, fmt.Sprintf("source: %s / %s rep by rep, records/s: %s, best %.2f; records per CPU-second: %s, best %.2f (-check floor %.2f on both bests)",
				r.Impl, srcBaseline, ratioList(wall), r.WallBestRatio, ratioList(cpu), r.CPURatio, sourceFloor(r.Impl)))
		}
	}
	return rows, nil
}
