// Command jetstream-pipeline is stream to stream with an exactly-once
// effect: sentences are published to stream IN; the JetStream spout
// (package source/jetstream) emits each message as a root; a split bolt
// emits each word with its id (the message's stream position and the
// word's index), then fails a fraction of its messages on purpose after
// emitting (the engine replays the whole message); the JetStream sink bolt
// (jetstream.Sink) publishes every word to stream OUT with its id as
// Nats-Msg-Id and acks it on the PubAck. A replay publishes the same ids
// again and the stream's duplicate window drops them. The program then
// reads OUT: every expected word must be there exactly once (duplicates:
// 0), the word counts equal the sentences'. Exit 0 when they do.
//
//	go run ./examples/jetstream-pipeline                        # an embedded nats-server, 2,000 sentences, 1% replayed
//	go run ./examples/jetstream-pipeline -fail 0.2              # many replays, still 0 duplicates
//	go run ./examples/jetstream-pipeline -nats nats://host:4222 # a real server (streams IN and OUT are created)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/xorack/xorack/source/jetstream"
	"github.com/xorack/xorack/source/jetstream/jstest"
	"github.com/xorack/xorack/topology"
)

// corpus: the sentences, in turn.
var corpus = []string{"to be or not to be", "all that glitters is not gold", "fortune favours the bold and the brave"}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("jetstream-pipeline", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("nats", "", "server URL; empty starts a nats-server in the process")
	n := fs.Int("sentences", 2000, "sentences to publish")
	fail := fs.Float64("fail", 0.01, "fraction of messages whose first attempt fails after its words were emitted (replayed)")
	deadline := fs.Duration("deadline", time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *n < 1 || *fail < 0 || *fail >= 1 {
		fmt.Fprintln(stderr, "jetstream-pipeline: want -sentences >= 1, -fail in [0, 1)")
		return 2
	}
	if err := pipeline(*url, *n, *fail, *deadline, stdout); err != nil {
		fmt.Fprintln(stderr, "jetstream-pipeline:", err)
		return 1
	}
	return 0
}

func pipeline(url string, n int, fail float64, deadline time.Duration, out io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if url == "" {
		dir, err := os.MkdirTemp("", "jetstream-pipeline-")
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
	nc, err := nats.Connect(url, nats.Name("jetstream-pipeline"))
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", url, err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return err
	}
	for _, sc := range []natsjs.StreamConfig{
		{Name: "IN", Subjects: []string{"in.>"}},
		{Name: "OUT", Subjects: []string{"out.>"}, Duplicates: 2 * time.Minute}, // the window replays must fall in
	} {
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("stream %q: %w", sc.Name, err)
		}
	}
	var last uint64
	for i := range n {
		ack, err := js.Publish(ctx, "in.sentences", []byte(corpus[i%len(corpus)]))
		if err != nil {
			return fmt.Errorf("publishing sentence %d: %w", i, err)
		}
		last = ack.Sequence
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, "IN", jetstream.ConsumerConfig("pipeline", 0, 0)); err != nil {
		return err
	}
	start := time.Now()

	sink, err := jetstream.NewSink(jetstream.SinkConfig{JetStream: js,
		Subject: func(*topology.Tuple) string { return "out.words" },
		Data:    func(t *topology.Tuple) ([]byte, error) { return []byte(t.Value(1).(string)), nil },
		MsgID:   func(t *topology.Tuple) string { return t.Value(0).(string) }})
	if err != nil {
		return err
	}
	seed := maphash.MakeSeed()
	b := topology.NewBuilder()
	b.Spout("sentences", func() topology.Spout {
		return jetstream.New(jetstream.Config{JetStream: js, Stream: "IN", Consumer: "pipeline"})
	}).Output("pos", "data")
	b.Bolt("split", func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, c *topology.BasicCollector) error {
			id := t.Value(0).(jetstream.Position).String()
			for i, w := range strings.Fields(string(t.Value(1).([]byte))) {
				if err := c.Emit(fmt.Sprintf("%s/%d", id, i), w); err != nil {
					return err
				}
			}
			if t.Attempt() == 1 && float64(maphash.String(seed, id)%1_000_000) < fail*1_000_000 {
				return errors.New("lost after the words were emitted") // the engine replays the message
			}
			return nil
		}))
	}).Executors(2).Input("sentences", topology.Shuffle()).Output("id", "word")
	b.Bolt("words", sink.Bolt).Executors(4).Input("split", topology.Fields("word"))
	cfg := topology.DefaultConfig()
	cfg.Retry = topology.RetryPolicy{MaxAttempts: 10, Backoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}
	top, err := b.Build(cfg)
	if err != nil {
		return err
	}
	if err := top.Start(); err != nil {
		return err
	}
	waitErr := waitAcked(ctx, js, last)
	if err := errors.Join(waitErr, top.Stop(ctx)); err != nil {
		return err
	}
	elapsed := time.Since(start)

	words, total, err := readOut(ctx, js)
	if err != nil {
		return err
	}
	got, want := map[string]int{}, map[string]int{}
	for _, w := range words {
		got[w]++
	}
	for i := range n {
		for _, w := range strings.Fields(corpus[i%len(corpus)]) {
			want[w]++
		}
	}
	ss := sink.Stats()
	fmt.Fprintf(out, "jetstream-pipeline: %d sentences -> %d messages in OUT in %v; sink published %d, replays that wrote nothing %d, failed %d\n",
		n, total, elapsed.Round(time.Millisecond), ss.Published, ss.Duplicates, ss.Failed)
	fmt.Fprintf(out, "duplicates: %d (messages in OUT with an id already there)\n", total-len(words))
	if total != len(words) || !maps.Equal(got, want) {
		return fmt.Errorf("OUT holds %d messages for %d ids; word counts equal the sentences': %v", total, len(words), maps.Equal(got, want))
	}
	fmt.Fprintln(out, "every expected word is in OUT exactly once; the word counts equal the sentences'")
	return nil
}

// waitAcked waits until the consumer's ack floor is the last sentence and
// nothing is pending.
func waitAcked(ctx context.Context, js natsjs.JetStream, last uint64) error {
	for {
		c, err := js.Consumer(ctx, "IN", "pipeline")
		if err != nil {
			return err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return err
		}
		if info.AckFloor.Stream >= last && info.NumAckPending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the consumer to ack up to %d (at %d): %w", last, info.AckFloor.Stream, ctx.Err())
		case <-time.After(20 * time.Millisecond): // polling the server, with the deadline
		}
	}
}

// readOut reads stream OUT from its start: each message's word by its
// Nats-Msg-Id, and the messages read.
func readOut(ctx context.Context, js natsjs.JetStream) (map[string]string, int, error) {
	s, err := js.Stream(ctx, "OUT")
	if err != nil {
		return nil, 0, err
	}
	end := s.CachedInfo().State.Msgs
	c, err := s.OrderedConsumer(ctx, natsjs.OrderedConsumerConfig{})
	if err != nil {
		return nil, 0, err
	}
	words := map[string]string{}
	total := 0
	for uint64(total) < end {
		batch, err := c.Fetch(500, natsjs.FetchMaxWait(time.Second))
		if err != nil {
			return nil, 0, err
		}
		for m := range batch.Messages() {
			total++
			words[m.Headers().Get(nats.MsgIdHdr)] = string(m.Data())
		}
		if err := batch.Error(); err != nil {
			return nil, 0, err
		}
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
	}
	return words, total, nil
}
