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
	"fmt"
	"io"
	"maps"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/xorack/xorack/examples/internal/kit"
	"github.com/xorack/xorack/source/jetstream"
	"github.com/xorack/xorack/topology"
)

// corpus: the sentences, in turn.
var corpus = kit.Sentences{"to be or not to be", "all that glitters is not gold", "fortune favours the bold and the brave"}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	return kit.Example{
		Name: "jetstream-pipeline",
		Defaults: kit.Defaults{Server: "nats", Sentences: 2000, Fail: 0.01,
			FailUsage: "fraction of messages whose first attempt fails after its words were emitted (replayed)"},
		Run: func(c kit.Common, stdout, _ io.Writer) error { return pipeline(c, stdout) },
	}.Main(args, stdout, stderr)
}

func pipeline(c kit.Common, out io.Writer) error {
	n := c.Sentences
	ctx, cancel := context.WithTimeout(context.Background(), c.Deadline)
	defer cancel()
	srv, err := kit.StartNATS(c.Server, "jetstream-pipeline")
	if err != nil {
		return err
	}
	defer srv.Close()
	js := srv.JS
	for _, sc := range []natsjs.StreamConfig{
		{Name: "IN", Subjects: []string{"in.>"}},
		{Name: "OUT", Subjects: []string{"out.>"}, Duplicates: 2 * time.Minute}, // the window replays must fall in
	} {
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("stream %q: %w", sc.Name, err)
		}
	}
	_, last, err := kit.Publish(ctx, js, "in.sentences", corpus, n)
	if err != nil {
		return err
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
	err = kit.Pipeline{
		Spout: func() topology.Spout {
			return jetstream.New(jetstream.Config{JetStream: js, Stream: "IN", Consumer: "pipeline"})
		},
		Fields: []string{"pos", "data"},
		Message: func(t *topology.Tuple) (string, string) {
			return t.Value(0).(jetstream.Position).String(), string(t.Value(1).([]byte))
		},
		Fail: c.Fail, Seed: c.Seed,
		Sink: sink.Bolt,
	}.Run(ctx, func() error {
		_, err := kit.WaitAcked(ctx, js, "IN", "pipeline", last)
		return err
	})
	if err != nil {
		return err
	}
	elapsed := time.Since(start)

	words, total, err := readOut(ctx, js)
	if err != nil {
		return err
	}
	got := map[string]int{}
	for _, w := range words {
		got[w]++
	}
	ss := sink.Stats()
	fmt.Fprintf(out, "jetstream-pipeline: %d sentences -> %d messages in OUT in %v; sink published %d, replays that wrote nothing %d, failed %d\n",
		n, total, elapsed.Round(time.Millisecond), ss.Published, ss.Duplicates, ss.Failed)
	fmt.Fprintf(out, "duplicates: %d (messages in OUT with an id already there)\n", total-len(words))
	var errs []error
	if total != len(words) {
		errs = append(errs, fmt.Errorf("OUT holds %d messages for %d ids", total, len(words)))
	}
	if want := corpus.Counts(n); !maps.Equal(got, want) {
		errs = append(errs, fmt.Errorf("OUT's word counts differ from the sentences' (%d words, %d in the sentences)", kit.Sum(got), kit.Sum(want)))
	}
	return kit.Verdict(out, "every expected word is in OUT exactly once; the word counts equal the sentences'", errs...)
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
