package jetstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/xorack/xorack/topology"
)

// Defaults for SinkConfig's zero fields.
const (
	// DefaultPublishTimeout bounds one message's publish, from the bolt's
	// call (the wait for room under MaxInFlightBytes included) to the
	// stream's PubAck; past it the input fails.
	DefaultPublishTimeout = 5 * time.Second
	// DefaultSinkMaxInFlightBytes bounds the bytes published and not yet
	// PubAcked, across the sink's tasks: 16 MiB, as the Kafka sink's.
	DefaultSinkMaxInFlightBytes = 16 << 20
)

// SinkConfig configures a Sink. JetStream, Subject, Data and MsgID are
// required.
type SinkConfig struct {
	// JetStream is the client; the sink neither opens nor closes its
	// connection.
	JetStream natsjs.JetStream
	// Subject returns the subject to publish a tuple on (a subject of the
	// output stream).
	Subject func(*topology.Tuple) string
	// Data returns the message's data for a tuple; an error fails the
	// tuple with it, nothing published.
	Data func(*topology.Tuple) ([]byte, error)
	// MsgID returns the message's Nats-Msg-Id: the same for every
	// replay of the same output, from the source position (for one
	// output per input message, its Position.String(); for several, the
	// position and the output's index). The stream's duplicate window
	// then makes a replay write nothing.
	MsgID func(*topology.Tuple) string
	// PublishTimeout bounds each publish; default DefaultPublishTimeout.
	PublishTimeout time.Duration
	// MaxInFlightBytes bounds the bytes (subject and data) of the
	// messages published and not yet PubAcked, across the sink's tasks;
	// default DefaultSinkMaxInFlightBytes. A task whose message does not
	// fit waits for room (first come, first served) within its
	// PublishTimeout; a message larger than the bound fails its input.
	MaxInFlightBytes int
}

// Sink is a JetStream publisher as a topology bolt: each input tuple
// becomes one message, with a Nats-Msg-Id from the source position, and
// the tuple is acked on the stream's PubAck (a duplicate's PubAck too:
// the stream has the message) or failed with a *PublishError. Within the
// stream's duplicate window (Duplicates, two minutes by default) a tree
// replayed after a failure or a crash writes nothing new: the exactly-once
// effect into a stream. One Sink serves every task of its bolt:
// b.Bolt("out", sink.Bolt).
//
// Each task waits in Execute for its message's PubAck (the collector acks
// only there); give the bolt several executors for more in flight, up to
// SinkConfig.MaxInFlightBytes: past it a task waits in Execute for room,
// so the bolt's input backs up to the spout's pending bound rather than
// into memory.
type Sink struct {
	cfg      SinkConfig
	inFlight budget
	stats    struct{ published, duplicates, failed atomic.Uint64 }
}

// PublishError is the failure a Sink gives an input whose message the
// stream did not take.
type PublishError struct {
	Subject, MsgID string
	Err            error // the server's or the client's error, or a timeout
}

func (e *PublishError) Error() string {
	return fmt.Sprintf("jetstream: publish on %q (Nats-Msg-Id %q): %v", e.Subject, e.MsgID, e.Err)
}

func (e *PublishError) Unwrap() error { return e.Err }

// SinkStats are a sink's counters.
type SinkStats struct {
	Published  uint64 // PubAcks of new messages (inputs acked)
	Duplicates uint64 // PubAcks the stream marked duplicate: a replay wrote nothing (inputs acked)
	Failed     uint64 // inputs failed
}

// NewSink returns a sink for cfg, or an error naming a bad field.
func NewSink(cfg SinkConfig) (*Sink, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	s := &Sink{cfg: cfg}
	s.inFlight.free = int64(cfg.MaxInFlightBytes)
	return s, nil
}

// validate returns c with every zero field filled from its Default
// constant, or an error naming the field and the value.
func (c SinkConfig) validate() (SinkConfig, error) {
	switch {
	case c.JetStream == nil:
		return c, errors.New("jetstream: SinkConfig.JetStream is nil")
	case c.Subject == nil:
		return c, errors.New("jetstream: SinkConfig.Subject is nil")
	case c.Data == nil:
		return c, errors.New("jetstream: SinkConfig.Data is nil")
	case c.MsgID == nil:
		return c, errors.New("jetstream: SinkConfig.MsgID is nil")
	}
	c.PublishTimeout = cmp.Or(c.PublishTimeout, DefaultPublishTimeout)
	if c.PublishTimeout < 0 {
		return c, fmt.Errorf("jetstream: SinkConfig.PublishTimeout %v is negative", c.PublishTimeout)
	}
	c.MaxInFlightBytes = cmp.Or(c.MaxInFlightBytes, DefaultSinkMaxInFlightBytes)
	if c.MaxInFlightBytes < 0 {
		return c, fmt.Errorf("jetstream: SinkConfig.MaxInFlightBytes %d is negative", c.MaxInFlightBytes)
	}
	return c, nil
}

// Bolt returns a bolt task of the sink: pass it to Builder.Bolt. It is a
// basic bolt: publish's error fails the input, nil acks it.
func (s *Sink) Bolt() topology.Bolt { return topology.Basic(topology.BasicFunc(s.publish)) }

// publish publishes t's message and returns on its PubAck, or with the
// error to fail t with: a *PublishError, or the Data function's.
func (s *Sink) publish(t *topology.Tuple, _ *topology.BasicCollector) error {
	data, err := s.cfg.Data(t)
	if err != nil {
		s.stats.failed.Add(1)
		return fmt.Errorf("jetstream: sink data: %w", err)
	}
	m := &nats.Msg{Subject: s.cfg.Subject(t), Data: data}
	id := s.cfg.MsgID(t)
	n := int64(len(m.Subject) + len(m.Data))
	if n > int64(s.cfg.MaxInFlightBytes) {
		s.stats.failed.Add(1)
		return &PublishError{Subject: m.Subject, MsgID: id,
			Err: fmt.Errorf("message of %d bytes, over SinkConfig.MaxInFlightBytes %d", n, s.cfg.MaxInFlightBytes)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.PublishTimeout)
	var ack *natsjs.PubAck
	if err = s.inFlight.take(ctx, n); err == nil {
		ack, err = s.cfg.JetStream.PublishMsg(ctx, m, natsjs.WithMsgID(id))
		s.inFlight.give(n)
	}
	cancel()
	if err != nil {
		s.stats.failed.Add(1)
		return &PublishError{Subject: m.Subject, MsgID: id, Err: err}
	}
	if ack.Duplicate {
		s.stats.duplicates.Add(1)
	} else {
		s.stats.published.Add(1)
	}
	return nil
}

// Stats returns the sink's counters; any goroutine.
func (s *Sink) Stats() SinkStats {
	return SinkStats{Published: s.stats.published.Load(), Duplicates: s.stats.duplicates.Load(), Failed: s.stats.failed.Load()}
}

// budget is a count of bytes shared by a sink's tasks: take waits, first
// come first served, until n bytes are free or ctx is done; give returns
// them.
type budget struct {
	mu      sync.Mutex
	free    int64
	waiters []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once the bytes are the waiter's
}

func (b *budget) take(ctx context.Context, n int64) error {
	b.mu.Lock()
	if len(b.waiters) == 0 && b.free >= n {
		b.free -= n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	select {
	case <-w.ready: // granted while ctx ended: hand the bytes on
		b.free += n
	default:
		i := slices.Index(b.waiters, w)
		b.waiters = slices.Delete(b.waiters, i, i+1)
	}
	b.grant()
	b.mu.Unlock()
	return fmt.Errorf("waiting for room under SinkConfig.MaxInFlightBytes: %w", ctx.Err())
}

func (b *budget) give(n int64) {
	b.mu.Lock()
	b.free += n
	b.grant()
	b.mu.Unlock()
}

// grant hands free bytes to the waiters in order. Called with mu held.
func (b *budget) grant() {
	for len(b.waiters) > 0 && b.free >= b.waiters[0].n {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.free -= w.n
		close(w.ready)
	}
}
