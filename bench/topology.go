package bench

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/topology"
)

// The topology level: word count end to end on the reference engine
// (package topology), a sentence spout -> split bolt -> count bolt
// (fields grouping on the word), with acking (impl "acked": one INIT per
// sentence, one ACK per tuple, the acker on Shards shards) and without
// (impl "unacked": 0 ackers, at most once), interleaved rep by rep in one
// run. A rep emits a fixed number of sentences and is timed from Start to
// Stop's return: Stop returns once every tuple is processed (acked: after
// every sentence completed; unacked: after the bolts drained their
// queues). trees/s counts sentences, msgs/s tuples executed by bolts.

// topologyImpls are the topology level's implementations, in run order.
var topologyImpls = []string{"acked", "unacked"}

// Word-count sentences: wcWords words each, drawn from a vocabulary of
// wcVocab, wcSentences distinct sentences cycled.
const (
	wcWords     = 8 // the wordcount shape's fan-out
	wcVocab     = 1000
	wcSentences = 1024
	// wcCalibrate is the sentences of the warm-up run that sizes the reps.
	wcCalibrate = 20_000
)

// wcCorpus is the sentences and, for verification, how often each word
// occurs in one cycle of them.
type wcCorpus struct {
	sentences []string
	perCycle  map[string]int
}

func newWCCorpus() *wcCorpus {
	c := &wcCorpus{perCycle: map[string]int{}}
	for k := range wcSentences {
		words := make([]string, wcWords)
		for j := range words {
			words[j] = fmt.Sprintf("w%03d", (k*wcWords+j)*7919%wcVocab)
			c.perCycle[words[j]]++
		}
		c.sentences = append(c.sentences, strings.Join(words, " "))
	}
	return c
}

// want is how often each word occurs in the first n sentences.
func (c *wcCorpus) want(n int) map[string]int {
	w := map[string]int{}
	for word, k := range c.perCycle {
		w[word] = k * (n / wcSentences)
	}
	for i := range n % wcSentences {
		for _, word := range strings.Fields(c.sentences[i]) {
			w[word]++
		}
	}
	return w
}

type wcSpout struct {
	c       *wcCorpus
	n, next int
	acked   *atomic.Int64
	failed  *atomic.Int64
}

func (s *wcSpout) Next(col *topology.SpoutCollector) {
	if s.next == s.n {
		col.Done()
		return
	}
	_ = col.Emit(s.next, s.c.sentences[s.next%wcSentences])
	s.next++
}
func (s *wcSpout) Ack(any)                     { s.acked.Add(1) }
func (s *wcSpout) Fail(any, *topology.Failure) { s.failed.Add(1) }

type wcSplit struct{}

func (wcSplit) Execute(t *topology.Tuple, c *topology.BoltCollector) {
	for _, w := range strings.Fields(t.String(0)) {
		_ = c.Emit(t, w)
	}
	c.Ack(t)
}

type wcCount struct{ counts map[string]int }

func (b *wcCount) Execute(t *topology.Tuple, c *topology.BoltCollector) {
	b.counts[t.String(0)]++
	c.Ack(t)
}

// wcResult is one timed word-count run.
type wcResult struct {
	d             time.Duration
	trees, tuples int64
	cpu           time.Duration
	gc            gcSum
	lat           latency
	bound         int
	err           error // verification
}

// runWordcount runs n sentences through the word count.
func runWordcount(corpus *wcCorpus, n int, acked bool, shards int, pin bool, seed uint64) (wcResult, error) {
	var ack, fail atomic.Int64
	var counters []*wcCount
	b := topology.NewBuilder()
	b.Spout("sentences", func() topology.Spout {
		return &wcSpout{c: corpus, n: n, acked: &ack, failed: &fail}
	}).Output("sentence")
	b.Bolt("split", func() topology.Bolt { return wcSplit{} }).Input("sentences", topology.Shuffle()).Output("word")
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
	g0, cpu0, t0 := readGC(), processCPU(), time.Now()
	if err := top.Start(); err != nil {
		return wcResult{}, err
	}
	<-top.Done()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := top.Stop(ctx); err != nil {
		return wcResult{}, err
	}
	res := wcResult{d: time.Since(t0), cpu: processCPU() - cpu0, trees: int64(n)}
	res.gc.add(g0, readGC())
	m := top.Metrics()
	res.tuples = int64(m.Component("split").Executed + m.Component("count").Executed)
	sp := m.Component("sentences")
	res.bound = sp.Bound
	if acked {
		res.lat = summarizeUs(sp.Latency)
	}
	// Verify: every sentence acked once (at most once: right at emit),
	// every word counted exactly as often as it was written.
	got := map[string]int{}
	for _, c := range counters {
		for w, k := range c.counts {
			got[w] += k
		}
	}
	switch want := corpus.want(n); {
	case ack.Load() != int64(n) || fail.Load() != 0:
		res.err = fmt.Errorf("%d of %d sentences acked, %d failed", ack.Load(), n, fail.Load())
	case res.tuples != int64(n*(1+wcWords)):
		res.err = fmt.Errorf("%d tuples executed, want %d", res.tuples, n*(1+wcWords))
	default:
		for w, k := range want {
			if got[w] != k {
				res.err = fmt.Errorf("word %q counted %d times, want %d", w, got[w], k)
				break
			}
		}
	}
	return res, nil
}

// topologyLevel runs the topology level's rows.
func (rn *runner) topologyLevel() ([]Row, error) {
	c := rn.cfg
	names := c.impls[LevelTopology]
	if len(names) == 0 {
		return nil, nil
	}
	corpus := newWCCorpus()
	pin := !c.NoPin
	rn.progress("topology wordcount: warm-up and calibration")
	cal, err := runWordcount(corpus, wcCalibrate, names[0] == "acked", c.Shards, pin, c.Seed)
	if err != nil {
		return nil, err
	}
	n := int(c.Msgs / int64(c.Reps))
	if c.Msgs == 0 {
		perRep := c.Duration / time.Duration(c.Reps)
		n = int(float64(cal.trees) / cal.d.Seconds() * perRep.Seconds())
	}
	n = max(n, 1000)
	res := map[string][]wcResult{}
	for rep := range c.Reps {
		for _, name := range names {
			rn.progress("topology wordcount: %s rep %d/%d", name, rep+1, c.Reps)
			r, err := runWordcount(corpus, n, name == "acked", c.Shards, pin, c.Seed+uint64(rep))
			if err != nil {
				return nil, err
			}
			res[name] = append(res[name], r)
		}
	}
	var rows []Row
	for _, name := range names {
		row := Row{Level: LevelTopology, Impl: name, Shape: "wordcount", Pending: topology.DefaultMaxSpoutPending,
			Shards: c.Shards, Timing: "wall", Clock: "wall", TimeoutNs: int64(topology.DefaultMessageTimeout)}
		if name == "unacked" {
			row.Shards = 0
		}
		var treeRates []float64
		var cpu time.Duration
		var gc gcSum
		var errs []string
		for _, r := range res[name] {
			row.RepMsgsPerSec = append(row.RepMsgsPerSec, float64(r.tuples)/r.d.Seconds())
			treeRates = append(treeRates, float64(r.trees)/r.d.Seconds())
			row.Msgs += r.tuples
			row.Seconds += r.d.Seconds()
			row.Roots += uint64(r.trees)
			cpu += r.cpu
			gc.cycles += r.gc.cycles
			gc.pauseNs += r.gc.pauseNs
			if r.err != nil {
				errs = append(errs, r.err.Error())
			} else {
				row.Completed += uint64(r.trees)
			}
		}
		row.MsgsPerSec = median(row.RepMsgsPerSec)
		row.TreesPerSec = median(treeRates)
		row.GCCycles, row.GCPauseNs = gc.cycles, gc.pauseNs
		row.CountersPerMsg = (&counterSum{}).perMsg(0)
		if cpu >= 0 && row.Msgs > 0 {
			x := float64(cpu) / float64(row.Msgs)
			row.CountersPerMsg["task-clock-ns"] = &x
		}
		row.CounterScope = "process: CPU time of every thread (getrusage) over the reps, per tuple executed"
		if name == "acked" {
			mid := res[name][len(res[name])/2].lat
			row.P50Ns, row.P99Ns, row.P999Ns, row.MaxNs, row.LatencyCount = mid.p50, mid.p99, mid.p999, mid.max, mid.count
			row.LatencySource = fmt.Sprintf("engine clock: spout emit to Ack, at full load (a queue of up to %d pending sentences), the middle rep",
				topology.DefaultMaxSpoutPending)
		}
		row.Verified = len(errs) == 0
		row.VerifyError = strings.Join(errs, "; ")
		rows = append(rows, row)
	}
	if a, u := findRow(rows, "acked"), findRow(rows, "unacked"); a != nil && u != nil && u.TreesPerSec > 0 {
		rn.rep.Notes = append(rn.rep.Notes, fmt.Sprintf("topology: acked/unacked trees/s = %.2f (%d sentences per rep, %d reps interleaved)",
			a.TreesPerSec/u.TreesPerSec, n, c.Reps))
	}
	return rows, nil
}

func findRow(rows []Row, impl string) *Row {
	for i := range rows {
		if rows[i].Impl == impl {
			return &rows[i]
		}
	}
	return nil
}

// summarizeUs is summarize for a histogram in microseconds.
func summarizeUs(h interface {
	TotalCount() int64
	ValueAtQuantile(float64) int64
	Max() int64
}) latency {
	if h == nil || h.TotalCount() == 0 {
		return latency{}
	}
	v := func(x int64) *int64 { x *= int64(time.Microsecond); return &x }
	return latency{p50: v(h.ValueAtQuantile(50)), p99: v(h.ValueAtQuantile(99)),
		p999: v(h.ValueAtQuantile(99.9)), max: v(h.Max()), count: h.TotalCount()}
}
