package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/xorack/xorack/topology"
)

// Defaults for SinkConfig's zero fields.
const (
	// DefaultSinkMaxInFlightBytes bounds the bytes of records produced and
	// not yet acknowledged by the broker, across the sink's tasks: 16 MiB
	// (franz-go's MaxBufferedBytes); a produce past it waits for room.
	DefaultSinkMaxInFlightBytes = 16 << 20
	// DefaultProduceTimeout bounds one record's produce, from the bolt's
	// call to the broker's acknowledgement; past it the input fails.
	DefaultProduceTimeout = 10 * time.Second
)

// SinkConfig configures a Sink. Brokers, Topic and Value are required.
type SinkConfig struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// Topic receives the records.
	Topic string
	// Key returns a record's key for a tuple (its partition, with the
	// default partitioner); nil: no key.
	Key func(*topology.Tuple) []byte
	// Value returns a record's value for a tuple; an error fails the
	// tuple with it, nothing produced.
	Value func(*topology.Tuple) ([]byte, error)
	// MaxInFlightBytes bounds the bytes produced and not yet
	// acknowledged; default DefaultSinkMaxInFlightBytes.
	MaxInFlightBytes int
	// ProduceTimeout bounds each record's produce, one already sent to a
	// broker that has not answered included; default
	// DefaultProduceTimeout.
	ProduceTimeout time.Duration
	// Opts are further client options (TLS, SASL, linger, compression),
	// applied before the sink's own: the seed brokers, idempotent writes
	// acknowledged by all in-sync replicas, MaxBufferedBytes, and
	// AllowIdempotentProduceCancellation (so a transactional id is
	// refused).
	Opts []kgo.Opt
}

// Sink is a Kafka producer as a topology bolt: each input tuple becomes one
// record, and the tuple is acked when the broker acknowledges the record
// (idempotent, all in-sync replicas), or failed with a *ProduceError
// naming the broker's error. It writes at least once: a tree failed after
// its records were written is replayed and writes them again (count
// Stats.Produced against what a reader sees; for an exactly-once effect,
// key the records by the source position and deduplicate downstream). One
// Sink serves every task of its bolt: b.Bolt("out", sink.Bolt).
//
// Each task waits in Execute for its record's acknowledgement: the
// collector acks only there, on the executor's goroutine. Give the bolt
// several executors for more records in flight; the client batches them
// into one request per broker.
type Sink struct {
	cfg     SinkConfig
	cl      *kgo.Client
	stats   struct{ produced, failed atomic.Uint64 }
	timeout time.Duration
}

// ProduceError is the failure a Sink gives an input whose record the
// broker did not take.
type ProduceError struct {
	Topic string
	Err   error // the client's or the broker's error (kerr), or a timeout
}

func (e *ProduceError) Error() string {
	return fmt.Sprintf("kafka: produce to topic %q: %v", e.Topic, e.Err)
}

func (e *ProduceError) Unwrap() error { return e.Err }

// SinkStats are a sink's counters.
type SinkStats struct {
	Produced uint64 // records the broker acknowledged (inputs acked)
	Failed   uint64 // inputs failed: a Value error, or a produce the broker refused or that timed out
}

// NewSink returns a sink for cfg, or an error naming a bad field. Its
// client connects on the first produce; Close closes it.
func NewSink(cfg SinkConfig) (*Sink, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	opts := append(append([]kgo.Opt(nil), cfg.Opts...),
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent writes need all in-sync replicas
		kgo.MaxBufferedBytes(cfg.MaxInFlightBytes),
		// ProduceTimeout fails a record sent to a broker that has not
		// answered too: without this the client waits for the broker's
		// answer, past any deadline. The input fails and its tree is
		// replayed, which may write the record twice (at least once).
		kgo.AllowIdempotentProduceCancellation(),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: sink client for topic %q: %w", cfg.Topic, err)
	}
	return &Sink{cfg: cfg, cl: cl, timeout: cfg.ProduceTimeout}, nil
}

// validate returns c with every zero field filled from its Default
// constant, or an error naming the field and the value.
func (c SinkConfig) validate() (SinkConfig, error) {
	switch {
	case len(c.Brokers) == 0:
		return c, errors.New("kafka: SinkConfig.Brokers is empty")
	case c.Topic == "":
		return c, errors.New("kafka: SinkConfig.Topic is empty")
	case c.Value == nil:
		return c, errors.New("kafka: SinkConfig.Value is nil")
	case c.MaxInFlightBytes < 0:
		return c, fmt.Errorf("kafka: SinkConfig.MaxInFlightBytes %d is negative", c.MaxInFlightBytes)
	case c.ProduceTimeout < 0:
		return c, fmt.Errorf("kafka: SinkConfig.ProduceTimeout %v is negative", c.ProduceTimeout)
	}
	for _, b := range c.Brokers {
		if b == "" {
			return c, fmt.Errorf("kafka: empty broker address in SinkConfig.Brokers %q", c.Brokers)
		}
	}
	c.MaxInFlightBytes = cmp.Or(c.MaxInFlightBytes, DefaultSinkMaxInFlightBytes)
	c.ProduceTimeout = cmp.Or(c.ProduceTimeout, DefaultProduceTimeout)
	return c, nil
}

// Bolt returns a bolt task of the sink: pass it to Builder.Bolt. It is a
// basic bolt: produce's error fails the input, nil acks it.
func (s *Sink) Bolt() topology.Bolt { return topology.Basic(topology.BasicFunc(s.produce)) }

// produce produces t's record and returns when the broker has it, or with
// the error to fail t with: a *ProduceError, or the Value function's.
func (s *Sink) produce(t *topology.Tuple, _ *topology.BasicCollector) (err error) {
	r := &kgo.Record{Topic: s.cfg.Topic}
	if r.Value, err = s.cfg.Value(t); err != nil {
		s.stats.failed.Add(1)
		return fmt.Errorf("kafka: sink value for topic %q: %w", s.cfg.Topic, err)
	}
	if s.cfg.Key != nil {
		r.Key = s.cfg.Key(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	err = s.cl.ProduceSync(ctx, r).FirstErr()
	cancel()
	if err != nil {
		s.stats.failed.Add(1)
		return &ProduceError{Topic: s.cfg.Topic, Err: err}
	}
	s.stats.produced.Add(1)
	return nil
}

// Stats returns the sink's counters; any goroutine.
func (s *Sink) Stats() SinkStats {
	return SinkStats{Produced: s.stats.produced.Load(), Failed: s.stats.failed.Load()}
}

// Close flushes what is buffered and closes the client. Call it after the
// topology has stopped.
func (s *Sink) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	err := s.cl.Flush(ctx)
	s.cl.Close()
	if err != nil {
		return fmt.Errorf("kafka: sink for topic %q: flush: %w", s.cfg.Topic, err)
	}
	return nil
}
