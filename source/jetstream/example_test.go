package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/xorack/xorack/source/jetstream"
	"github.com/xorack/xorack/source/jetstream/jstest"
	"github.com/xorack/xorack/topology"
)

// server starts an embedded nats-server and connects to it; stop undoes
// both.
func server() (js natsjs.JetStream, stop func()) {
	dir, err := os.MkdirTemp("", "jetstream-example-")
	if err != nil {
		panic(err)
	}
	srv, err := jstest.Start(jstest.Config{StoreDir: dir})
	if err != nil {
		panic(err)
	}
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		panic(err)
	}
	js, err = natsjs.New(nc)
	if err != nil {
		panic(err)
	}
	return js, func() { nc.Close(); srv.Close(); os.RemoveAll(dir) }
}

// load makes stream with subject stream+".in", publishes msgs to it and
// makes the durable consumer consumer on it.
func load(js natsjs.JetStream, stream, consumer string, msgs ...string) {
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: stream, Subjects: []string{stream + ".in"}}); err != nil {
		panic(err)
	}
	for _, m := range msgs {
		if _, err := js.Publish(ctx, stream+".in", []byte(m)); err != nil {
			panic(err)
		}
	}
	if _, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig(consumer, 0, 0)); err != nil {
		panic(err)
	}
}

// runToEnd builds and starts the topology, waits until consumer has
// acknowledged everything up to last (a stream has no end: its ack floor
// says when the work is done), and stops it.
func runToEnd(b *topology.Builder, js natsjs.JetStream, stream, consumer string, last uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	top, err := b.Build(topology.Config{})
	if err != nil {
		panic(err)
	}
	if err := top.Start(); err != nil {
		panic(err)
	}
	for ctx.Err() == nil {
		c, err := js.Consumer(ctx, stream, consumer)
		if err != nil {
			panic(err)
		}
		if i := c.CachedInfo(); i.AckFloor.Stream == last && i.NumAckPending == 0 && i.NumPending == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling the server, within the deadline
	}
	if ctx.Err() != nil {
		panic("consumer did not settle")
	}
	if err := top.Stop(ctx); err != nil {
		panic(err)
	}
}

// A word count over a stream: a durable pull consumer with explicit
// acks, read by two spout tasks. Each sentence is acked once its words
// are counted.
func Example() {
	js, stop := server()
	defer stop()
	load(js, "SENTENCES", "wordcount", "the cow jumped over the moon", "the man went to the store", "over the hill")

	var mu sync.Mutex
	counts := map[string]int{}
	b := topology.NewBuilder()
	b.Spout("sentences", func() topology.Spout {
		return jetstream.New(jetstream.Config{JetStream: js, Stream: "SENTENCES", Consumer: "wordcount"})
	}).Tasks(2).Output("pos", "data")
	b.Bolt("count", func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, c *topology.BasicCollector) error {
			mu.Lock()
			defer mu.Unlock()
			for _, w := range strings.Fields(string(t.Value(1).([]byte))) {
				counts[w]++
			}
			return nil
		}))
	}).Input("sentences", topology.Shuffle())
	runToEnd(b, js, "SENTENCES", "wordcount", 3)
	mu.Lock()
	defer mu.Unlock()
	fmt.Println("the:", counts["the"], "over:", counts["over"], "store:", counts["store"])
	// Output: the: 5 over: 2 store: 1
}

// A message that cannot be decoded is dead-lettered, then Termed: the
// server never delivers it again. Decode here emits the sentence as a
// string and refuses empty ones.
func Example_deadLetter() {
	js, stop := server()
	defer stop()
	load(js, "IN", "reader", "hello", "", "world")
	var mu sync.Mutex
	var got, dead []string
	cfg := jetstream.Config{
		JetStream: js, Stream: "IN", Consumer: "reader",
		Decode: func(m natsjs.Msg, pos jetstream.Position) ([]any, error) {
			if len(m.Data()) == 0 {
				return nil, errors.New("empty message")
			}
			return []any{string(m.Data())}, nil
		},
		DeadLetter: func(d jetstream.DeadLetter) {
			mu.Lock()
			dead = append(dead, fmt.Sprintf("%v (delivery %d): %v", d.Position, d.Delivered, d.Err))
			mu.Unlock()
		},
	}
	b := topology.NewBuilder()
	b.Spout("in", func() topology.Spout { return jetstream.New(cfg) }).Output("text")
	b.Bolt("print", func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, c *topology.BasicCollector) error {
			mu.Lock()
			got = append(got, t.String(0))
			mu.Unlock()
			return nil
		}))
	}).Input("in", topology.Shuffle())
	runToEnd(b, js, "IN", "reader", 3)
	slices.Sort(got)
	fmt.Println("processed:", got)
	fmt.Println("dead letters:", dead)
	// Output:
	// processed: [hello world]
	// dead letters: [IN/2 (delivery 1): jetstream: decoding message IN/2: empty message]
}

// Stream to stream, exactly once in effect: the sink publishes each
// message's data with its source position as Nats-Msg-Id, so the output
// stream's duplicate window drops what a replay publishes again.
func ExampleSink() {
	js, stop := server()
	defer stop()
	load(js, "IN", "copy", "one", "two", "three")
	if _, err := js.CreateStream(context.Background(), natsjs.StreamConfig{Name: "OUT", Subjects: []string{"OUT.copy"}}); err != nil {
		panic(err)
	}
	sink, err := jetstream.NewSink(jetstream.SinkConfig{JetStream: js,
		Subject: func(*topology.Tuple) string { return "OUT.copy" },
		Data:    func(t *topology.Tuple) ([]byte, error) { return t.Value(1).([]byte), nil },
		MsgID:   func(t *topology.Tuple) string { return t.Value(0).(jetstream.Position).String() }})
	if err != nil {
		panic(err)
	}
	b := topology.NewBuilder()
	b.Spout("in", func() topology.Spout {
		return jetstream.New(jetstream.Config{JetStream: js, Stream: "IN", Consumer: "copy"})
	}).Output("pos", "data")
	b.Bolt("out", sink.Bolt).Input("in", topology.Shuffle())
	runToEnd(b, js, "IN", "copy", 3)
	// A replay of the same positions writes nothing new.
	_, err = js.PublishMsg(context.Background(), &nats.Msg{Subject: "OUT.copy", Data: []byte("one")}, natsjs.WithMsgID("IN/1"))
	if err != nil {
		panic(err)
	}
	s, err := js.Stream(context.Background(), "OUT")
	if err != nil {
		panic(err)
	}
	fmt.Println("published:", sink.Stats().Published, "messages in OUT:", s.CachedInfo().State.Msgs)
	// Output: published: 3 messages in OUT: 3
}
