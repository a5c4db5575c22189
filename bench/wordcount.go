package bench

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/topology"
)

// The word-count levels (topology, source) share the topology and the
// rows: a spout of the level's making -> split bolt -> count bolt (fields
// grouping on the word), acked and unacked, interleaved rep by rep.

// wcTopology is a word-count topology being built or run.
type wcTopology struct {
	top      *topology.Topology
	spout    string // the spout component's name
	acked    bool
	counters []*wcCount

	g0   gcMark
	cpu0 time.Duration
	t0   time.Time
	// first is when a split bolt took the first sentence, in ns after t0
	// (0: none yet): the end of the spout's startup (a Kafka spout's
	// group join and first fetch).
	first atomic.Int64
	// cpuFirst is the process's CPU time (processCPU) as first was set.
	cpuFirst atomic.Int64
}

// buildWordcount builds the word count on spout (emitting one sentence
// field), with shards acker shards when acked and at most once otherwise.
func buildWordcount(spout string, newSpout func() topology.Spout, acked bool, shards int, pin bool, seed uint64) (*wcTopology, error) {
	w := &wcTopology{spout: spout, acked: acked}
	b := topology.NewBuilder()
	b.Spout(spout, newSpout).Output("sentence")
	b.Bolt("split", func() topology.Bolt { return wcSplit{w: w} }).Input(spout, topology.Shuffle()).Output("word")
	b.Bolt("count", func() topology.Bolt {
		c := &wcCount{counts: map[string]*int{}}
		w.counters = append(w.counters, c)
		return c
	}).Input("split", topology.Fields("word"))
	cfg := topology.Config{Pin: pin, Seed: seed, AtMostOnce: !acked}
	if acked {
		cfg.Acker.Shards = shards
	}
	top, err := b.Build(cfg)
	if err != nil {
		return nil, err
	}
	w.top = top
	return w, nil
}

// start starts the topology and its clocks.
func (w *wcTopology) start() error {
	w.g0, w.cpu0, w.t0 = readGC(), processCPU(), time.Now()
	return w.top.Start()
}

// result times the run (call it once the topology has stopped) and
// verifies that n sentences went through: 9 tuples each, every word
// counted exactly as often as it was written.
func (w *wcTopology) result(corpus *wcCorpus, n int) wcResult {
	res := wcResult{d: time.Since(w.t0), startup: time.Duration(w.first.Load()), cpu: processCPU() - w.cpu0, trees: int64(n)}
	if res.startup > 0 && w.cpu0 >= 0 {
		res.cpuStartup = time.Duration(w.cpuFirst.Load()) - w.cpu0
	}
	res.gc.add(w.g0, readGC())
	m := w.top.Metrics()
	res.tuples = int64(m.Component("split").Executed + m.Component("count").Executed)
	sp := m.Component(w.spout)
	res.bound = sp.Bound
	if w.acked {
		res.lat = summarizeUs(sp.Latency)
	}
	got := map[string]int{}
	for _, c := range w.counters {
		for word, k := range c.counts {
			got[word] += *k
		}
	}
	if res.tuples != int64(n*(1+wcWords)) {
		res.err = fmt.Errorf("%d tuples executed, want %d", res.tuples, n*(1+wcWords))
		return res
	}
	for word, k := range corpus.want(n) {
		if got[word] != k {
			res.err = fmt.Errorf("word %q counted %d times, want %d", word, got[word], k)
			break
		}
	}
	return res
}

// wcLevel describes a word-count level to wordcountLevel.
type wcLevel struct {
	level   Level
	label   string // progress: "topology wordcount"
	acked   string // the acked impl's name (its latency is reported)
	unacked string // the unacked impl's name: the note's acked/unacked ratio; "" for none
	// others are further acked impls, run with the acker like acked.
	others    []string
	calibrate int // sentences of the warm-up run that sizes the reps
	minN      int // fewest sentences per rep sized by duration (Config.Msgs wins); 0 for 1000
	maxN      int // most sentences per rep; 0 for no bound
	// run runs n sentences as impl name; rep is -1 for the warm-up.
	run     func(name string, rep, n int) (wcResult, error)
	unit    string // what a tree is, for the latency source and the note: "sentences"
	scope   string // the rows' CounterScope
	ratioOf string // the note's label: "topology: acked/unacked trees/s"
}

// wordcountLevel runs a word-count level: a warm-up that sizes the reps
// (unless Config.Msgs fixes them), the reps interleaved impl by impl, one
// row per impl with the median rep, and a note with the acked/unacked
// ratio.
func (rn *runner) wordcountLevel(l wcLevel) ([]Row, error) {
	c := rn.cfg
	names := c.impls[l.level]
	if len(names) == 0 {
		return nil, nil
	}
	rn.progress(rn.repCost(), "%s: warm-up and calibration", l.label)
	cal, err := l.run(names[0], -1, l.calibrate)
	if err != nil {
		return nil, err
	}
	n := int(c.Msgs / int64(c.Reps))
	if c.Msgs == 0 {
		perRep := c.Duration / time.Duration(c.Reps)
		n = int(float64(cal.trees) / cal.d.Seconds() * perRep.Seconds())
	}
	n = max(n, 1000)
	if c.Msgs == 0 {
		n = max(n, l.minN)
	}
	if l.maxN > 0 {
		n = min(n, l.maxN)
	}
	res := map[string][]wcResult{}
	for rep := range c.Reps {
		for _, name := range names {
			rn.progress(rn.repCost(), "%s: %s rep %d/%d", l.label, name, rep+1, c.Reps)
			r, err := l.run(name, rep, n)
			if err != nil {
				return nil, err
			}
			res[name] = append(res[name], r)
		}
	}
	var rows []Row
	for _, name := range names {
		row := Row{Level: l.level, Impl: name, Shape: "wordcount", Pending: topology.DefaultMaxSpoutPending,
			Shards: c.Shards, Timing: "wall", Clock: "wall", TimeoutNs: int64(topology.DefaultMessageTimeout)}
		if name != l.acked && !slices.Contains(l.others, name) {
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
		row.CounterScope = l.scope
		if name == l.acked || slices.Contains(l.others, name) {
			mid := res[name][len(res[name])/2].lat
			row.P50Ns, row.P99Ns, row.P999Ns, row.MaxNs, row.LatencyCount = mid.p50, mid.p99, mid.p999, mid.max, mid.count
			row.LatencySource = fmt.Sprintf("engine clock: spout emit to Ack, at full load (a queue of up to %d pending %s), the middle rep",
				topology.DefaultMaxSpoutPending, l.unit)
		}
		row.Verified = len(errs) == 0
		row.VerifyError = strings.Join(errs, "; ")
		rows = append(rows, row)
	}
	var acked, unacked *Row
	for i := range rows {
		switch rows[i].Impl {
		case l.acked:
			acked = &rows[i]
		case l.unacked:
			unacked = &rows[i]
		}
	}
	if acked != nil && unacked != nil && unacked.TreesPerSec > 0 {
		rn.rep.Notes = append(rn.rep.Notes, fmt.Sprintf("%s = %.2f (%d %s per rep, %d reps interleaved)",
			l.ratioOf, acked.TreesPerSec/unacked.TreesPerSec, n, l.unit, c.Reps))
	}
	return rows, nil
}
