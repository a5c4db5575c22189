package jstest_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/xorack/xorack/source/jetstream/jstest"
)

// A NATS server with JetStream in the process: a stream, a durable pull
// consumer with explicit acks, one message fetched and acked.
func ExampleStart() {
	dir, err := os.MkdirTemp("", "jstest-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	n, err := jstest.Start(jstest.Config{StoreDir: dir})
	if err != nil {
		panic(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	nc, err := nats.Connect(n.URL())
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SENTENCES", Subjects: []string{"sentences"}}); err != nil {
		panic(err)
	}
	if _, err := js.Publish(ctx, "sentences", []byte("an apple a day")); err != nil {
		panic(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "SENTENCES", jetstream.ConsumerConfig{Durable: "wc", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		panic(err)
	}
	b, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		panic(err)
	}
	for m := range b.Messages() {
		md, _ := m.Metadata()
		fmt.Printf("stream seq %d, delivery %d: %s\n", md.Sequence.Stream, md.NumDelivered, m.Data())
		if err := m.DoubleAck(ctx); err != nil {
			panic(err)
		}
	}
	// Output: stream seq 1, delivery 1: an apple a day
}
