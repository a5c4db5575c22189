// Command wordcount is the word count on xorack's reference engine: a
// sentence spout, a split bolt and a count bolt (fields grouping on the
// word), at least once. It runs a bounded number of sentences, prints the
// top counts and the engine's counters, and exits 0 only if every sentence
// completed.
//
//	go run ./examples/wordcount                          # 100,000 sentences, a second or two
//	go run ./examples/wordcount -fail 0.05 -drop 0.01    # faults: replays, and still every sentence completes
//	go run ./examples/wordcount -ackers 0 -drop 0.01     # at most once: words are lost, nobody notices
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/examples/internal/kit"
	"github.com/xorack/xorack/topology"
)

var corpus = kit.Sentences{
	"the cow jumped over the moon",
	"an apple a day keeps the doctor away",
	"four score and seven years ago",
	"snow white and the seven dwarfs",
	"i am at two with nature",
	"the quick brown fox jumps over the lazy dog",
	"a stitch in time saves nine",
	"all that glitters is not gold",
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type options struct {
	kit.Common
	drop      float64
	ackers    int
	splitters int
	counters  int
	timeout   time.Duration
}

func run(args []string, stdout, stderr io.Writer) int {
	var o options
	return kit.Example{
		Name:     "wordcount",
		Defaults: kit.Defaults{Sentences: 100_000, Attempts: 20, FailUsage: "fraction of sentences the split bolt fails (they are replayed)"},
		Flags: func(fs *flag.FlagSet) {
			fs.Float64Var(&o.drop, "drop", 0, "fraction of sentences the split bolt loses without a word (they time out and are replayed)")
			fs.IntVar(&o.ackers, "ackers", 1, "acker shards; 0 = at most once")
			fs.IntVar(&o.splitters, "split", 2, "split bolt tasks")
			fs.IntVar(&o.counters, "count", 2, "count bolt tasks")
			fs.DurationVar(&o.timeout, "timeout", time.Second, "message timeout (a whole number of ms)")
		},
		Check: func(c *kit.Checks) {
			c.Fraction("-drop", o.drop)
			c.Rule(o.splitters >= 1, "-split", o.splitters, "want at least 1 task")
			c.Rule(o.counters >= 1, "-count", o.counters, "want at least 1 task")
		},
		Run: func(c kit.Common, stdout, _ io.Writer) error { o.Common = c; return wordcount(o, stdout) },
	}.Main(args, stdout, stderr)
}

// sentenceSpout emits sentence i of n as corpus[i % len], tracked by i.
type sentenceSpout struct {
	n           int
	next        int
	acked, dead *atomic.Int64
}

func (s *sentenceSpout) Next(c *topology.SpoutCollector) {
	if s.next == s.n {
		c.Done()
		return
	}
	if err := c.Emit(s.next, corpus.At(s.next)); err != nil {
		panic(err) // a programming error: the stream declares one field
	}
	s.next++
}

func (s *sentenceSpout) Ack(any)                     { s.acked.Add(1) }
func (s *sentenceSpout) Fail(any, *topology.Failure) { s.dead.Add(1) }

// splitBolt splits sentences into words, failing or losing some on
// purpose.
type splitBolt struct {
	fail, drop float64
	rng        *rand.Rand
}

func (b *splitBolt) Open(ctx topology.TaskContext) error {
	b.rng = rand.New(rand.NewPCG(uint64(ctx.Task), 42))
	return nil
}

var errInjected = errors.New("injected failure")

func (b *splitBolt) Execute(t *topology.Tuple, c *topology.BoltCollector) {
	switch r := b.rng.Float64(); {
	case r < b.fail:
		c.Fail(t, errInjected)
		return
	case r < b.fail+b.drop:
		return // lost: neither acked nor failed, it times out
	}
	for _, w := range strings.Fields(t.String(0)) {
		if err := c.Emit(t, w); err != nil {
			c.Fail(t, err)
			return
		}
	}
	c.Ack(t)
}

// countBolt counts the words of its task's share. The fields grouping
// sends each word to one task, so each task keeps its own map, without a
// lock, and the program adds them up once the topology has stopped.
type countBolt struct{ counts map[string]int }

func (b *countBolt) Execute(t *topology.Tuple, c *topology.BoltCollector) {
	b.counts[t.String(0)]++
	c.Ack(t)
}

func wordcount(o options, out io.Writer) error {
	var acked, dead atomic.Int64
	var tasks []*countBolt
	b := topology.NewBuilder()
	b.Spout("sentences", func() topology.Spout { return &sentenceSpout{n: o.Sentences, acked: &acked, dead: &dead} }).Output("sentence")
	b.Bolt("split", func() topology.Bolt { return &splitBolt{fail: o.Fail, drop: o.drop} }).Tasks(o.splitters).
		Input("sentences", topology.Shuffle()).Output("word")
	b.Bolt("count", func() topology.Bolt {
		c := &countBolt{counts: map[string]int{}}
		tasks = append(tasks, c)
		return c
	}).Tasks(o.counters).
		Input("split", topology.Fields("word"))
	cfg := topology.Config{
		AtMostOnce: o.ackers == 0, MessageTimeout: o.timeout, Seed: o.Seed,
		Retry: topology.RetryPolicy{MaxAttempts: o.Attempts, Backoff: 5 * time.Millisecond, MaxBackoff: 200 * time.Millisecond},
	}
	if o.ackers > 0 {
		cfg.Acker.Shards = o.ackers
	}
	top, err := b.Build(cfg)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := top.Start(); err != nil {
		return err
	}
	var timedOut bool
	select {
	case <-top.Done():
	case <-time.After(o.Deadline):
		timedOut = true
	}
	elapsed := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := top.Stop(ctx); err != nil {
		return err
	}

	counts := map[string]int{}
	for _, c := range tasks {
		for w, n := range c.counts {
			counts[w] += n
		}
	}
	expected, total := kit.Sum(corpus.Counts(o.Sentences)), kit.Sum(counts)
	mode := fmt.Sprintf("at least once, %d acker shard(s)", o.ackers)
	if o.ackers == 0 {
		mode = "at most once (0 ackers)"
	}
	fmt.Fprintf(out, "wordcount: %d sentences, %s, fail %.3g, drop %.3g: %v (%.0f sentences/s)\n",
		o.Sentences, mode, o.Fail, o.drop, elapsed.Round(time.Millisecond), float64(o.Sentences)/elapsed.Seconds())
	kit.PrintTop(out, counts, 10)
	m := top.Metrics()
	sp, split, count := m.Component("sentences"), m.Component("split"), m.Component("count")
	fmt.Fprintf(out, "sentences: completed %d, failed attempts %d explicit / %d timeout / %d full, replayed %d, dead-lettered %d\n",
		acked.Load(), sp.FailedExplicit, sp.FailedTimeout, sp.FailedFull, sp.Replayed, sp.DeadLettered)
	if sp.Latency.TotalCount() > 0 {
		us := func(q float64) time.Duration { return time.Duration(sp.Latency.ValueAtQuantile(q)) * time.Microsecond }
		fmt.Fprintf(out, "complete latency: p50 %v, p99 %v, max %v\n", us(50), us(99), time.Duration(sp.Latency.Max())*time.Microsecond)
	}
	fmt.Fprintf(out, "split: executed %d, acked %d, failed %d; count: executed %d, late acks %d\n",
		split.Executed, split.Acked, split.Failed, count.Executed, count.LateAcks+split.LateAcks)
	fmt.Fprintf(out, "words counted %d, in the sentences %d (%+d: replays count twice, losses not at all)\n", total, expected, total-expected)
	var verdict error
	switch {
	case timedOut:
		verdict = fmt.Errorf("not done after %v: %d of %d sentences completed", o.Deadline, acked.Load(), o.Sentences)
	case acked.Load() != int64(o.Sentences):
		verdict = fmt.Errorf("%d of %d sentences completed (%d dead-lettered)", acked.Load(), o.Sentences, dead.Load())
	}
	return kit.Verdict(out, "every sentence completed", verdict)
}
