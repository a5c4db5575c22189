package kafkatest

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// MaxBrokers bounds Config.Brokers: a test cluster, not a fleet.
const MaxBrokers = 16

// MaxPartitions bounds Config.Partitions.
const MaxPartitions = 1024

// Config configures Start. The zero value is one broker and no
// topics.
type Config struct {
	// Brokers is the number of brokers, 1 when zero.
	Brokers int
	// Topics are created at start, each with Partitions partitions.
	Topics []string
	// Partitions per topic, 1 when zero.
	Partitions int32
	// MinSessionTimeout is the shortest group session a member may ask
	// for (Kafka's group.min.session.timeout.ms, 6 s by default): lower
	// it for tests whose members die and must be noticed in less.
	MinSessionTimeout time.Duration
}

// Cluster is a Kafka cluster running in the process (franz-go's kfake).
type Cluster struct {
	cluster *kfake.Cluster
}

// Start starts a Kafka cluster on loopback and returns when its
// brokers listen.
func Start(cfg Config) (*Cluster, error) {
	if cfg.Brokers == 0 {
		cfg.Brokers = 1
	}
	if cfg.Partitions == 0 {
		cfg.Partitions = 1
	}
	if cfg.Brokers < 1 || cfg.Brokers > MaxBrokers {
		return nil, fmt.Errorf("kafkatest: %d Kafka brokers, want 1 to %d", cfg.Brokers, MaxBrokers)
	}
	if cfg.Partitions < 1 || cfg.Partitions > MaxPartitions {
		return nil, fmt.Errorf("kafkatest: %d partitions per topic, want 1 to %d", cfg.Partitions, MaxPartitions)
	}
	for _, t := range cfg.Topics {
		if t == "" {
			return nil, fmt.Errorf("kafkatest: empty topic name in %q", cfg.Topics)
		}
	}
	opts := []kfake.Opt{kfake.NumBrokers(cfg.Brokers)}
	if len(cfg.Topics) > 0 {
		opts = append(opts, kfake.SeedTopics(cfg.Partitions, cfg.Topics...))
	}
	if cfg.MinSessionTimeout > 0 {
		opts = append(opts, kfake.GroupMinSessionTimeout(cfg.MinSessionTimeout))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: starting the Kafka cluster: %w", err)
	}
	return &Cluster{cluster: c}, nil
}

// Addrs returns the brokers' host:port addresses, all on 127.0.0.1: the
// seed brokers for a client.
func (k *Cluster) Addrs() []string { return k.cluster.ListenAddrs() }

// Cluster returns the kfake cluster, for what a test needs beyond a
// broker's address (kfake's request hooks and fault injection).
func (k *Cluster) Cluster() *kfake.Cluster { return k.cluster }

// Close stops the cluster; its data is gone.
func (k *Cluster) Close() { k.cluster.Close() }
