package kit

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/xorack/xorack/source/kafka/kafkatest"
)

// Kafka is a client of a Kafka cluster, and the cluster it started if it
// started one.
type Kafka struct {
	Addrs  []string // the seed brokers
	Where  string   // the cluster, for a report: its brokers, or "a Kafka cluster in the process (kfake)"
	Client *kgo.Client
	undo   undo
}

// StartKafka connects to the comma-separated seed brokers; brokers empty,
// it starts a cluster in the process with cfg. Its client produces round
// robin over the partitions. Close undoes both.
func StartKafka(brokers string, cfg kafkatest.Config) (_ *Kafka, err error) {
	k := &Kafka{Where: brokers}
	if brokers == "" {
		var c *kafkatest.Cluster
		if c, err = kafkatest.Start(cfg); err != nil {
			return nil, err
		}
		k.undo.push(c.Close)
		k.Addrs, k.Where = c.Addrs(), "a Kafka cluster in the process (kfake)"
	} else {
		k.Addrs = strings.Split(brokers, ",")
	}
	if k.Client, err = kgo.NewClient(kgo.SeedBrokers(k.Addrs...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())); err != nil {
		k.Close()
		return nil, err
	}
	k.undo.push(k.Client.Close)
	return k, nil
}

// Close closes the client and stops the cluster it started.
func (k *Kafka) Close() { k.undo.run() }

// Produce writes sentences 0 to n-1 of s to topic and returns the records
// as the brokers took them (partition and offset set).
func Produce(ctx context.Context, cl *kgo.Client, topic string, s Sentences, n int) ([]*kgo.Record, error) {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Value: []byte(s.At(i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return nil, fmt.Errorf("producing to %q: %w", topic, err)
	}
	return recs, nil
}
