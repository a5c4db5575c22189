// Command jetstream-wordcount is the word count reading a NATS JetStream
// stream, at least once: it loads sentences into a stream, reads them
// through a durable pull consumer with the JetStream spout, splits them
// into words and counts the words into an idempotent sink, failing a
// fraction of the counts on purpose after the sink wrote them (the server
// redelivers the message after the retry policy's delay, and its words
// are counted again). It exits 0 only if every message was processed and acknowledged:
// the consumer's ack floor at the last message, nothing pending.
//
// By default it starts nats-server embedded, with its store in a temporary
// directory; -nats points it at a real server instead (the stream is
// created if missing, and the consumer -consumer is made afresh, reading
// from the first message this run loads).
//
//	go run ./examples/jetstream-wordcount                        # 5,000 sentences on an embedded server, seconds
//	go run ./examples/jetstream-wordcount -fail 0.05             # more failed attempts, each redelivered
//	go run ./examples/jetstream-wordcount -nats nats://127.0.0.1:4222
//
// The sink shows the idempotent-sink pattern: each message's word counts
// are stored under its position in the stream (stream, sequence) and a
// word, and a write of a key already there changes nothing, so a
// redelivered message, whose words are counted again, leaves the totals
// as they were. Beside it the program keeps plain running totals, which
// count a redelivered message twice.
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
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/xorack/xorack/source/jetstream"
	"github.com/xorack/xorack/source/jetstream/jstest"
	"github.com/xorack/xorack/topology"
)

// corpus is the sentences loaded, round robin.
var corpus = []string{
	"a journey of a thousand miles begins with a single step",
	"the early bird catches the worm",
	"actions speak louder than words",
	"where there is smoke there is fire",
	"the pen is mightier than the sword",
	"when in rome do as the romans do",
	"better late than never",
	"the squeaky wheel gets the grease",
}

func sentence(i int) string { return corpus[i%len(corpus)] }

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type options struct {
	natsURL          string
	stream, consumer string
	sentences        int
	fail             float64
	spouts           int
	ackWait          time.Duration
	attempts         int
	deadline         time.Duration
	seed             uint64
}

func run(args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("jetstream-wordcount", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.natsURL, "nats", "", "a NATS server's URL (nats://host:port); empty: start one embedded")
	fs.StringVar(&o.stream, "stream", "WORDCOUNT", "the stream to load the sentences into (subject <stream>.sentences)")
	fs.StringVar(&o.consumer, "consumer", "wordcount", "the durable consumer to read through (made afresh)")
	fs.IntVar(&o.sentences, "sentences", 5000, "sentences to load and count")
	fs.Float64Var(&o.fail, "fail", 0.01, "fraction of word counts failed after the sink wrote them (the sentence is redelivered after a delay)")
	fs.IntVar(&o.spouts, "spouts", 2, "spout tasks reading the consumer")
	fs.DurationVar(&o.ackWait, "ackwait", 2*time.Second, "the consumer's AckWait")
	fs.IntVar(&o.attempts, "attempts", 10, "most attempts (deliveries) per sentence before it is dead-lettered")
	fs.DurationVar(&o.deadline, "deadline", time.Minute, "give up after this long")
	fs.Uint64Var(&o.seed, "seed", 1, "fault injection seed")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.sentences < 1 || o.fail < 0 || o.fail >= 1 || o.spouts < 1 || o.attempts < 1 || o.stream == "" || o.consumer == "" {
		fmt.Fprintln(stderr, "jetstream-wordcount: want -sentences >= 1, -fail in [0, 1), -spouts and -attempts >= 1, a -stream and a -consumer")
		return 2
	}
	if err := wordcount(o, stdout); err != nil {
		fmt.Fprintln(stderr, "jetstream-wordcount:", err)
		return 1
	}
	return 0
}

func wordcount(o options, out io.Writer) error {
	url := o.natsURL
	if url == "" {
		dir, err := os.MkdirTemp("", "jetstream-wordcount-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		srv, err := jstest.Start(jstest.Config{StoreDir: dir})
		if err != nil {
			return err
		}
		defer srv.Close()
		url = srv.URL()
	}
	nc, err := nats.Connect(url, nats.Name("jetstream-wordcount"))
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", url, err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.deadline)
	defer cancel()

	began := time.Now()
	first, last, err := load(ctx, js, o.stream, o.sentences)
	if err != nil {
		return err
	}
	loaded := time.Since(began)
	sink := NewSink()
	r, err := countOnce(ctx, js, o, first, last, sink)
	if err != nil {
		return err
	}
	report(out, o, r, sink, loaded)
	return r.verdict(sink, o.sentences)
}

// publishWindow bounds the publishes load has in flight, far below the
// client's limit.
const publishWindow = 256

// load publishes n sentences to stream (creating it if missing) and
// returns the stream sequences of the first and the last.
func load(ctx context.Context, js natsjs.JetStream, stream string, n int) (first, last uint64, err error) {
	subject := stream + ".sentences"
	if _, err := js.CreateOrUpdateStream(ctx, natsjs.StreamConfig{Name: stream, Subjects: []string{subject}}); err != nil {
		return 0, 0, fmt.Errorf("stream %q: %w", stream, err)
	}
	// Publish in windows, each acknowledged before the next: the client
	// refuses a publish with ErrTooManyStalledMsgs when its outstanding
	// publishes stay at its limit (4,000 by default) past a short stall
	// (200 ms), which a busy machine reaches with all n in flight.
	futures := make([]natsjs.PubAckFuture, n)
	for i := range n {
		if futures[i], err = js.PublishAsync(subject, []byte(sentence(i))); err != nil {
			return 0, 0, fmt.Errorf("publishing sentence %d: %w", i, err)
		}
		if (i+1)%publishWindow != 0 && i != n-1 {
			continue
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("publishing %d sentences: %w", n, ctx.Err())
		}
	}
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			if i == 0 {
				first = ack.Sequence
			}
			if ack.Sequence != first+uint64(i) {
				return 0, 0, fmt.Errorf("sentence %d stored at sequence %d, want %d: another client is publishing to %q", i, ack.Sequence, first+uint64(i), subject)
			}
			last = ack.Sequence
		case err := <-f.Err():
			return 0, 0, err
		}
	}
	return first, last, nil
}

// run is what one pass over the stream saw.
type result struct {
	elapsed   time.Duration
	settled   bool
	info      *natsjs.ConsumerInfo
	first     uint64
	last      uint64
	stats     jetstream.Stats
	metrics   topology.Metrics
	mu        sync.Mutex
	processed map[uint64]int // by stream sequence: times split completed
	dead      int
}

// countOnce makes consumer o.consumer afresh, reading from first, runs the
// word count through it until its ack floor reaches last with nothing
// pending (or ctx ends), and stops.
func countOnce(ctx context.Context, js natsjs.JetStream, o options, first, last uint64, sink *Sink) (*result, error) {
	if err := js.DeleteConsumer(ctx, o.stream, o.consumer); err != nil && !errors.Is(err, natsjs.ErrConsumerNotFound) {
		return nil, fmt.Errorf("consumer %q: %w", o.consumer, err)
	}
	cc := jetstream.ConsumerConfig(o.consumer, o.ackWait, 0)
	cc.DeliverPolicy, cc.OptStartSeq = natsjs.DeliverByStartSequencePolicy, first
	if _, err := js.CreateConsumer(ctx, o.stream, cc); err != nil {
		return nil, fmt.Errorf("consumer %q: %w", o.consumer, err)
	}
	r := &result{first: first, last: last, processed: map[uint64]int{}}
	var spouts []*jetstream.Spout
	scfg := jetstream.Config{
		JetStream: js, Stream: o.stream, Consumer: o.consumer,
		Decode: func(m natsjs.Msg, pos jetstream.Position) ([]any, error) { return []any{pos, string(m.Data())}, nil },
		DeadLetter: func(d jetstream.DeadLetter) {
			r.mu.Lock()
			r.dead++
			r.mu.Unlock()
		},
	}
	b := topology.NewBuilder()
	b.Spout("sentences", func() topology.Spout {
		s := jetstream.New(scfg)
		spouts = append(spouts, s)
		return s
	}).Tasks(o.spouts).Output("pos", "sentence")
	b.Bolt("split", func() topology.Bolt { return &splitBolt{r: r} }).Tasks(2).
		Input("sentences", topology.Shuffle()).Output("word", "pos", "n")
	b.Bolt("count", func() topology.Bolt { return &countBolt{sink: sink, fail: o.fail, seed: o.seed} }).Tasks(2).
		Input("split", topology.Fields("word"))
	top, err := b.Build(topology.Config{
		MessageTimeout: 10 * time.Second, Seed: o.seed, // one in-process acker shard: the zero Acker
		Retry: topology.RetryPolicy{MaxAttempts: o.attempts, Backoff: 20 * time.Millisecond, MaxBackoff: time.Second},
	})
	if err != nil {
		return nil, err
	}
	began := time.Now()
	if err := top.Start(); err != nil {
		return nil, err
	}
	r.info, r.settled = waitSettled(ctx, js, o.stream, o.consumer, last)
	r.elapsed = time.Since(began)
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := top.Stop(stopCtx); err != nil {
		return nil, err
	}
	for _, s := range spouts {
		st := s.Stats()
		r.stats.Fetched += st.Fetched
		r.stats.Acked += st.Acked
		r.stats.Naked += st.Naked
		r.stats.NakedStopped += st.NakedStopped
		r.stats.DeadLettered += st.DeadLettered
		r.stats.InProgress += st.InProgress
	}
	r.metrics = top.Metrics()
	return r, nil
}

// waitSettled polls the consumer until its ack floor is at last with
// nothing pending, or ctx ends.
func waitSettled(ctx context.Context, js natsjs.JetStream, stream, consumer string, last uint64) (*natsjs.ConsumerInfo, bool) {
	var info *natsjs.ConsumerInfo
	for {
		if c, err := js.Consumer(ctx, stream, consumer); err == nil {
			info = c.CachedInfo()
			if info.AckFloor.Stream >= last && info.NumAckPending == 0 && info.NumPending == 0 {
				return info, true
			}
		}
		select {
		case <-ctx.Done():
			return info, false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// splitBolt splits a sentence into its distinct words, each with the
// message's position and its number of occurrences, and records that it
// processed the message.
type splitBolt struct{ r *result }

func (b *splitBolt) Execute(t *topology.Tuple, c *topology.BoltCollector) {
	pos := t.Value(0).(jetstream.Position)
	n := map[string]int{}
	words := strings.Fields(t.String(1))
	for _, w := range words {
		n[w]++
	}
	for _, w := range words {
		if k := n[w]; k > 0 {
			if err := c.Emit(t, w, pos, k); err != nil {
				c.Fail(t, err)
				return
			}
			n[w] = 0
		}
	}
	c.Ack(t)
	b.r.mu.Lock()
	b.r.processed[pos.Seq]++
	b.r.mu.Unlock()
}

// countBolt writes each word's count in a message to the sink, then fails
// a fraction of its inputs on purpose: the write happened, the tree
// fails, the message is redelivered and written again.
type countBolt struct {
	sink *Sink
	fail float64
	seed uint64
	rng  *rand.Rand
}

func (b *countBolt) Open(ctx topology.TaskContext) error {
	b.rng = rand.New(rand.NewPCG(b.seed, uint64(ctx.Task)))
	return nil
}

var errInjected = errors.New("injected failure after the write")

func (b *countBolt) Execute(t *topology.Tuple, c *topology.BoltCollector) {
	b.sink.Put(t.Value(1).(jetstream.Position), t.String(0), t.Int(2))
	if b.rng.Float64() < b.fail {
		c.Fail(t, errInjected)
		return
	}
	c.Ack(t)
}

// Sink is the idempotent word-count store. A word's count in one message
// is written under the key (the message's stream and sequence, the word);
// a write of a key already present is a no-op, so processing a message
// again (a redelivery) changes no total. Processing is deterministic per
// message (its words are its sentence's), so the second write would equal
// the first. Beside it, Naive keeps plain running totals, which count
// every redelivery again.
//
// A real sink stores the key with the count in one atomic write (a
// database row with a unique key, a transaction over the key set and the
// total); here a map under a mutex.
type Sink struct {
	mu      sync.Mutex
	applied map[sinkKey]int
	totals  map[string]int
	naive   map[string]int
	writes  int
	noops   int
}

type sinkKey struct {
	pos  jetstream.Position
	word string
}

// NewSink returns an empty sink.
func NewSink() *Sink {
	return &Sink{applied: map[sinkKey]int{}, totals: map[string]int{}, naive: map[string]int{}}
}

// Put writes word's count n in the message at pos, once.
func (s *Sink) Put(pos jetstream.Position, word string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	s.naive[word] += n
	k := sinkKey{pos, word}
	if _, ok := s.applied[k]; ok {
		s.noops++
		return
	}
	s.applied[k] = n
	s.totals[word] += n
}

// Totals returns a copy of the idempotent totals and of the naive ones.
func (s *Sink) Totals() (idempotent, naive map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idempotent, naive = map[string]int{}, map[string]int{}
	for w, n := range s.totals {
		idempotent[w] = n
	}
	for w, n := range s.naive {
		naive[w] = n
	}
	return idempotent, naive
}

// Writes returns the writes made and those that were no-ops.
func (s *Sink) Writes() (writes, noops int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes, s.noops
}

// expected is the word count of sentences 0..n-1.
func expected(n int) map[string]int {
	m := map[string]int{}
	for i := range n {
		for _, w := range strings.Fields(sentence(i)) {
			m[w]++
		}
	}
	return m
}

func sum(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// duplicates returns how many messages were processed more than once, how
// many extra times, and how many of first..last never.
func (r *result) duplicates() (again, extra, missing int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for seq := r.first; seq <= r.last; seq++ {
		switch c := r.processed[seq]; {
		case c == 0:
			missing++
		case c > 1:
			again++
			extra += c - 1
		}
	}
	return again, extra, missing
}

func report(out io.Writer, o options, r *result, sink *Sink, loaded time.Duration) {
	where := "embedded nats-server"
	if o.natsURL != "" {
		where = o.natsURL
	}
	n := int(r.last - r.first + 1)
	fmt.Fprintf(out, "jetstream-wordcount: %d sentences on %s (stream %s, sequences %d-%d), loaded in %v, counted in %v (%.0f sentences/s)\n",
		n, where, o.stream, r.first, r.last, loaded.Round(time.Millisecond), r.elapsed.Round(time.Millisecond), float64(n)/r.elapsed.Seconds())
	again, extra, missing := r.duplicates()
	fmt.Fprintf(out, "messages: fetched %d, acked %d, failed attempts Naked with a delay %d, dead-lettered %d, InProgress sent %d\n",
		r.stats.Fetched, r.stats.Acked, r.stats.Naked, r.stats.DeadLettered, r.stats.InProgress)
	fmt.Fprintf(out, "processed: %d messages never, %d more than once (%d extra times)\n", missing, again, extra)
	if r.info != nil {
		fmt.Fprintf(out, "consumer %s: ack floor %d, %d ack pending, %d pending\n",
			o.consumer, r.info.AckFloor.Stream, r.info.NumAckPending, r.info.NumPending)
	}
	idem, naive := sink.Totals()
	writes, noops := sink.Writes()
	fmt.Fprintf(out, "sink: %d words counted, %d writes of which %d no-ops; plain running totals %d words (%+d: the words of redelivered sentences, counted again)\n",
		sum(idem), writes, noops, sum(naive), sum(naive)-sum(idem))
	type wc struct {
		w string
		n int
	}
	var top []wc
	for w, c := range idem {
		top = append(top, wc{w, c})
	}
	sort.Slice(top, func(i, j int) bool { return top[i].n > top[j].n || top[i].n == top[j].n && top[i].w < top[j].w })
	fmt.Fprintln(out, "top words:")
	for _, e := range top[:min(5, len(top))] {
		fmt.Fprintf(out, "  %-8s %d\n", e.w, e.n)
	}
}

// verdict is nil only if every message was processed and acked, and the
// idempotent totals are the sentences' word counts.
func (r *result) verdict(sink *Sink, n int) error {
	_, _, missing := r.duplicates()
	idem, _ := sink.Totals()
	want := expected(n)
	switch {
	case !r.settled:
		return fmt.Errorf("the consumer did not settle: ack floor %d of %d", r.info.AckFloor.Stream, r.last)
	case missing > 0 || r.dead > 0:
		return fmt.Errorf("%d messages never processed, %d dead-lettered", missing, r.dead)
	case len(idem) != len(want):
		return fmt.Errorf("sink holds %d distinct words, the sentences %d", len(idem), len(want))
	}
	for w, c := range want {
		if idem[w] != c {
			return fmt.Errorf("sink counts %q %d times, the sentences %d", w, idem[w], c)
		}
	}
	return nil
}
