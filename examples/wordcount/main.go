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
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/topology"
)

var corpus = []string{
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
	sentences  int
	fail, drop float64
	ackers     int
	splitters  int
	counters   int
	timeout    time.Duration
	deadline   time.Duration
	attempts   int
	seed       uint64
}

func run(args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("wordcount", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.sentences, "sentences", 100_000, "sentences to emit")
	fs.Float64Var(&o.fail, "fail", 0, "fraction of sentences the split bolt fails (they are replayed)")
	fs.Float64Var(&o.drop, "drop", 0, "fraction of sentences the split bolt loses without a word (they time out and are replayed)")
	fs.IntVar(&o.ackers, "ackers", 1, "acker shards; 0 = at most once")
	fs.IntVar(&o.splitters, "split", 2, "split bolt tasks")
	fs.IntVar(&o.counters, "count", 2, "count bolt tasks")
	fs.DurationVar(&o.timeout, "timeout", time.Second, "message timeout (a whole number of ms)")
	fs.DurationVar(&o.deadline, "deadline", time.Minute, "give up after this long")
	fs.IntVar(&o.attempts, "attempts", 20, "most attempts per sentence before it is dead-lettered")
	fs.Uint64Var(&o.seed, "seed", 1, "fault injection seed")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := o.check(); err != nil {
		fmt.Fprintln(stderr, "wordcount:", err)
		return 2
	}
	if err := wordcount(o, stdout); err != nil {
		fmt.Fprintln(stderr, "wordcount:", err)
		return 1
	}
	return 0
}

// check names every flag that breaks its rule, with the value given.
func (o *options) check() error {
	var errs []string
	if o.sentences < 1 {
		errs = append(errs, fmt.Sprintf("-sentences %d: want at least 1", o.sentences))
	}
	if o.fail < 0 || o.fail >= 1 {
		errs = append(errs, fmt.Sprintf("-fail %v: want a fraction in [0, 1)", o.fail))
	}
	if o.drop < 0 || o.drop >= 1 {
		errs = append(errs, fmt.Sprintf("-drop %v: want a fraction in [0, 1)", o.drop))
	}
	if o.splitters < 1 {
		errs = append(errs, fmt.Sprintf("-split %d: want at least 1 task", o.splitters))
	}
	if o.counters < 1 {
		errs = append(errs, fmt.Sprintf("-count %d: want at least 1 task", o.counters))
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "; "))
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
	if err := c.Emit(s.next, corpus[s.next%len(corpus)]); err != nil {
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

// countBolt counts the words of its task's share.
type countBolt struct {
	mu     *sync.Mutex
	counts map[string]int
}

func (b *countBolt) Execute(t *topology.Tuple, c *topology.BoltCollector) {
	b.mu.Lock()
	b.counts[t.String(0)]++
	b.mu.Unlock()
	c.Ack(t)
}

func wordcount(o options, out io.Writer) error {
	var acked, dead atomic.Int64
	var mu sync.Mutex
	counts := map[string]int{}
	b := topology.NewBuilder()
	b.Spout("sentences", func() topology.Spout { return &sentenceSpout{n: o.sentences, acked: &acked, dead: &dead} }).Output("sentence")
	b.Bolt("split", func() topology.Bolt { return &splitBolt{fail: o.fail, drop: o.drop} }).Tasks(o.splitters).
		Input("sentences", topology.Shuffle()).Output("word")
	b.Bolt("count", func() topology.Bolt { return &countBolt{mu: &mu, counts: counts} }).Tasks(o.counters).
		Input("split", topology.Fields("word"))
	cfg := topology.Config{
		AtMostOnce: o.ackers == 0, MessageTimeout: o.timeout, Seed: o.seed,
		Retry: topology.RetryPolicy{MaxAttempts: o.attempts, Backoff: 5 * time.Millisecond, MaxBackoff: 200 * time.Millisecond},
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
	case <-time.After(o.deadline):
		timedOut = true
	}
	elapsed := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := top.Stop(ctx); err != nil {
		return err
	}

	expected := 0
	for i := range o.sentences {
		expected += len(strings.Fields(corpus[i%len(corpus)]))
	}
	type wc struct {
		w string
		n int
	}
	var top10 []wc
	total := 0
	for w, n := range counts {
		top10 = append(top10, wc{w, n})
		total += n
	}
	sort.Slice(top10, func(i, j int) bool {
		return top10[i].n > top10[j].n || top10[i].n == top10[j].n && top10[i].w < top10[j].w
	})
	mode := fmt.Sprintf("at least once, %d acker shard(s)", o.ackers)
	if o.ackers == 0 {
		mode = "at most once (0 ackers)"
	}
	fmt.Fprintf(out, "wordcount: %d sentences, %s, fail %.3g, drop %.3g: %v (%.0f sentences/s)\n",
		o.sentences, mode, o.fail, o.drop, elapsed.Round(time.Millisecond), float64(o.sentences)/elapsed.Seconds())
	fmt.Fprintln(out, "top words:")
	for _, e := range top10[:min(10, len(top10))] {
		fmt.Fprintf(out, "  %-8s %d\n", e.w, e.n)
	}
	m := top.Metrics()
	sp, split, count := m.Component("sentences"), m.Component("split"), m.Component("count")
	fmt.Fprintf(out, "sentences: completed %d, failed attempts %d explicit / %d timeout / %d rejected, replayed %d, dead-lettered %d\n",
		acked.Load(), sp.FailedExplicit, sp.FailedTimeout, sp.FailedRejected, sp.Replayed, sp.DeadLettered)
	if sp.Latency.TotalCount() > 0 {
		us := func(q float64) time.Duration { return time.Duration(sp.Latency.ValueAtQuantile(q)) * time.Microsecond }
		fmt.Fprintf(out, "complete latency: p50 %v, p99 %v, max %v\n", us(50), us(99), time.Duration(sp.Latency.Max())*time.Microsecond)
	}
	fmt.Fprintf(out, "split: executed %d, acked %d, failed %d; count: executed %d, late acks %d\n",
		split.Executed, split.Acked, split.Failed, count.Executed, count.LateAcks+split.LateAcks)
	fmt.Fprintf(out, "words counted %d, in the sentences %d (%+d: replays count twice, losses not at all)\n", total, expected, total-expected)
	switch {
	case timedOut:
		return fmt.Errorf("not done after %v: %d of %d sentences completed", o.deadline, acked.Load(), o.sentences)
	case acked.Load() != int64(o.sentences):
		return fmt.Errorf("%d of %d sentences completed (%d dead-lettered)", acked.Load(), o.sentences, dead.Load())
	}
	return nil
}
