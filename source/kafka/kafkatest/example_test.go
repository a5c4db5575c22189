package kafkatest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/xorack/xorack/source/kafka/kafkatest"
)

// A Kafka cluster in the process: a franz-go client produces to it and
// consumes from it over loopback, as it would from a remote cluster.
func ExampleStart() {
	k, err := kafkatest.Start(kafkatest.Config{Topics: []string{"sentences"}})
	if err != nil {
		panic(err)
	}
	defer k.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addrs()...), kgo.ConsumeTopics("sentences"))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "sentences", Value: []byte("the cow jumped over the moon")}).FirstErr(); err != nil {
		panic(err)
	}
	r := cl.PollFetches(ctx).Records()[0]
	fmt.Printf("%s/%d@%d: %s\n", r.Topic, r.Partition, r.Offset, r.Value)
	// Output: sentences/0@0: the cow jumped over the moon
}
