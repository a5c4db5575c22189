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
// (impl "unacked": AtMostOnce, no acking), interleaved rep by rep in one
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

// wcSplit splits a sentence into words. It marks its topology's first
// tuple (wcTopology.first): the moment the spout's first root came in.
type wcSplit struct{ w *wcTopology }

func (s wcSplit) Execute(t *topology.Tuple, c *topology.BoltCollector) {
	if s.w.first.Load() == 0 {
		// The process's CPU time too (read after Stop, as first is).
		cpu := processCPU()
		if s.w.first.CompareAndSwap(0, int64(max(time.Since(s.w.t0), 1))) {
			s.w.cpuFirst.Store(int64(cpu))
		}
	}
	for _, w := range strings.Fields(sentence(t)) {
		_ = c.Emit(t, w)
	}
	c.Ack(t)
}

// wcCount counts words. Its keys are copies: a word may be a substring
// of a Kafka record the spout recycles once the record is done (the
// source level), and a Go map with string keys stores the key of every
// assignment, m[w]++ included, so the count is behind a pointer and the
// key is written once, copied.
type wcCount struct{ counts map[string]*int }

func (b *wcCount) Execute(t *topology.Tuple, c *topology.BoltCollector) {
	w := t.String(0)
	if n := b.counts[w]; n != nil {
		*n++
	} else {
		b.counts[strings.Clone(w)] = new(1)
	}
	c.Ack(t)
}

// wcResult is one timed word-count run.
type wcResult struct {
	d             time.Duration
	startup       time.Duration // from Start to the first sentence split (wcTopology.first)
	cpuStartup    time.Duration // the process's CPU time over startup
	trees, tuples int64
	cpu           time.Duration
	gc            gcSum
	lat           latency
	bound         int
	err           error // verification
	// fetch is a Kafka spout's fetch and commit counters over the rep
	// (source level; zero elsewhere).
	fetch struct{ pauses, commits uint64 }
}

// runWordcount runs n sentences through the word count.
func runWordcount(corpus *wcCorpus, n int, acked bool, shards int, pin bool, seed uint64) (wcResult, error) {
	var ack, fail atomic.Int64
	w, err := buildWordcount("sentences", func() topology.Spout {
		return &wcSpout{c: corpus, n: n, acked: &ack, failed: &fail}
	}, acked, shards, pin, seed)
	if err != nil {
		return wcResult{}, err
	}
	if err := w.start(); err != nil {
		return wcResult{}, err
	}
	<-w.top.Done()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.top.Stop(ctx); err != nil {
		return wcResult{}, err
	}
	// Verify: every sentence acked once (at most once: right at emit),
	// every word counted exactly as often as it was written.
	res := w.result(corpus, n)
	if ack.Load() != int64(n) || fail.Load() != 0 {
		res.err = fmt.Errorf("%d of %d sentences acked, %d failed", ack.Load(), n, fail.Load())
	}
	return res, nil
}

// topologyLevel runs the topology level's rows.
func (rn *runner) topologyLevel() ([]Row, error) {
	c := rn.cfg
	corpus := newWCCorpus()
	return rn.wordcountLevel(wcLevel{
		level: LevelTopology, label: "topology wordcount", acked: "acked", unacked: "unacked", calibrate: wcCalibrate,
		run: func(name string, rep, n int) (wcResult, error) {
			return runWordcount(corpus, n, name == "acked", c.Shards, !c.NoPin, c.Seed+uint64(max(rep, 0)))
		},
		unit:    "sentences",
		scope:   "process: CPU time of every thread (getrusage) over the reps, per tuple executed",
		ratioOf: "topology: acked/unacked trees/s",
	})
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
