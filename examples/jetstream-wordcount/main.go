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
// as they were. Beside it the sink keeps plain running totals, which
// count a redelivered message twice.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"sync"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/xorack/xorack/examples/internal/kit"
	"github.com/xorack/xorack/source/jetstream"
	"github.com/xorack/xorack/topology"
)

// corpus is the sentences loaded, in turn.
var corpus = kit.Sentences{
	"a journey of a thousand miles begins with a single step",
	"the early bird catches the worm",
	"actions speak louder than words",
	"where there is smoke there is fire",
	"the pen is mightier than the sword",
	"when in rome do as the romans do",
	"better late than never",
	"the squeaky wheel gets the grease",
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type options struct {
	kit.Common
	stream, consumer string
	spouts           int
	ackWait          time.Duration
}

// Sink is the idempotent word-count store, its keys the messages'
// positions in the stream.
type Sink = kit.Sink[jetstream.Position]

func run(args []string, stdout, stderr io.Writer) int {
	var o options
	return kit.Example{
		Name: "jetstream-wordcount",
		Defaults: kit.Defaults{Server: "nats", Sentences: 5000, Fail: 0.01, Attempts: 10,
			FailUsage: "fraction of word counts failed after the sink wrote them (the sentence is redelivered after a delay)"},
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.stream, "stream", "WORDCOUNT", "the stream to load the sentences into (subject <stream>.sentences)")
			fs.StringVar(&o.consumer, "consumer", "wordcount", "the durable consumer to read through (made afresh)")
			fs.IntVar(&o.spouts, "spouts", 2, "spout tasks reading the consumer")
			fs.DurationVar(&o.ackWait, "ackwait", 2*time.Second, "the consumer's AckWait")
		},
		Check: func(c *kit.Checks) {
			c.AtLeast("-spouts", o.spouts, 1)
			c.Rule(o.stream != "", "-stream", `""`, "want a stream name")
			c.Rule(o.consumer != "", "-consumer", `""`, "want a consumer name")
		},
		Run: func(c kit.Common, stdout, _ io.Writer) error { o.Common = c; return wordcount(o, stdout) },
	}.Main(args, stdout, stderr)
}

func wordcount(o options, out io.Writer) error {
	n, err := kit.StartNATS(o.Server, "jetstream-wordcount")
	if err != nil {
		return err
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), o.Deadline)
	defer cancel()

	began := time.Now()
	first, last, err := load(ctx, n.JS, o.stream, o.Sentences)
	if err != nil {
		return err
	}
	loaded := time.Since(began)
	sink := kit.NewSink[jetstream.Position]()
	r, err := countOnce(ctx, n.JS, o, first, last, sink)
	if err != nil {
		return err
	}
	report(out, n.Where, o, r, sink, loaded)
	return r.verdict(out, sink, o.Sentences)
}

// load publishes n sentences to stream (creating it if missing) and
// returns the stream sequences of the first and the last.
func load(ctx context.Context, js natsjs.JetStream, stream string, n int) (first, last uint64, err error) {
	subject := stream + ".sentences"
	if _, err := js.CreateOrUpdateStream(ctx, natsjs.StreamConfig{Name: stream, Subjects: []string{subject}}); err != nil {
		return 0, 0, fmt.Errorf("stream %q: %w", stream, err)
	}
	return kit.Publish(ctx, js, subject, corpus, n)
}

// result is what one pass over the stream saw.
type result struct {
	elapsed   time.Duration
	settled   error // nil when the consumer's ack floor reached last, nothing pending
	info      *natsjs.ConsumerInfo
	first     uint64
	last      uint64
	stats     jetstream.Stats
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
	b.Bolt("count", kit.CountInto(sink, o.Fail, o.Seed, func(t *topology.Tuple) (jetstream.Position, string, int) {
		return t.Value(1).(jetstream.Position), t.String(0), t.Int(2)
	})).Tasks(2).
		Input("split", topology.Fields("word"))
	top, err := b.Build(topology.Config{
		MessageTimeout: 10 * time.Second, Seed: o.Seed, // one in-process acker shard: the zero Acker
		Retry: topology.RetryPolicy{MaxAttempts: o.Attempts, Backoff: 20 * time.Millisecond, MaxBackoff: time.Second},
	})
	if err != nil {
		return nil, err
	}
	began := time.Now()
	if err := top.Start(); err != nil {
		return nil, err
	}
	r.info, r.settled = kit.WaitAcked(ctx, js, o.stream, o.consumer, last)
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
	return r, nil
}

// splitBolt splits a sentence into its distinct words, each with the
// message's position and its number of occurrences, and records that it
// processed the message.
type splitBolt struct{ r *result }

func (b *splitBolt) Execute(t *topology.Tuple, c *topology.BoltCollector) {
	pos := t.Value(0).(jetstream.Position)
	for _, w := range kit.Distinct(t.String(1)) {
		if err := c.Emit(t, w.Word, pos, w.N); err != nil {
			c.Fail(t, err)
			return
		}
	}
	c.Ack(t)
	b.r.mu.Lock()
	b.r.processed[pos.Seq]++
	b.r.mu.Unlock()
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

func report(out io.Writer, where string, o options, r *result, sink *Sink, loaded time.Duration) {
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
	applied, noops := sink.Writes()
	fmt.Fprintf(out, "sink: %d words counted, %d writes of which %d no-ops; plain running totals %d words (%+d: the words of redelivered sentences, counted again)\n",
		kit.Sum(idem), applied+noops, noops, kit.Sum(naive), kit.Sum(naive)-kit.Sum(idem))
	kit.PrintTop(out, idem, 5)
}

// verdict is nil only if every message was processed and acked, and the
// idempotent totals are the sentences' word counts.
func (r *result) verdict(out io.Writer, sink *Sink, n int) error {
	_, _, missing := r.duplicates()
	idem, _ := sink.Totals()
	want := corpus.Counts(n)
	var errs []error
	if r.settled != nil {
		errs = append(errs, r.settled)
	}
	if missing > 0 || r.dead > 0 {
		errs = append(errs, fmt.Errorf("%d messages never processed, %d dead-lettered", missing, r.dead))
	}
	if !maps.Equal(idem, want) {
		errs = append(errs, fmt.Errorf("sink counts %d words (%d distinct), the sentences %d (%d distinct)", kit.Sum(idem), len(idem), kit.Sum(want), len(want)))
	}
	return kit.Verdict(out, "every message processed and acked; the sink's totals are the sentences' word counts", errs...)
}
