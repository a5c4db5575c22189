package pipeline

import (
	"cmp"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/ring"
)

// Config describes a pipeline under test: its shape (as an engine sees an
// acker: acker.Spec's fields) and what each impl needs.
type Config struct {
	// Producers, Tasks, Receivers and ReceiverOf are acker.Spec's: the
	// send handles, the spout tasks, the inboxes (0: one per task) and the
	// task -> inbox map (nil: task mod Receivers).
	Producers  int
	Tasks      int
	Receivers  int
	ReceiverOf func(task int) int
	// Shards is xorack's shard count; the baselines have one table of
	// Shards × MaxPending roots.
	Shards int
	// MaxPending is the roots each shard may hold.
	MaxPending int
	// Timeout and Clock are the shards' (0, nil: ackcore's defaults).
	Timeout time.Duration
	Clock   ackcore.Clock
	// Batch is the messages a sender hands over at once (xorack: the
	// span a shard drains per ring per pass); 0: acker.DefaultBatch.
	Batch int
	// OutcomeRingSize is xorack's shard -> receiver ring (0: default).
	OutcomeRingSize int
	// Pin pins xorack's executors; Idle is its idle strategy (nil:
	// default).
	Pin  bool
	Idle *ring.Idle
}

// Pipe is a concurrent acker under test: an acker.Port (senders, inboxes,
// Stop) that is started, and whose counters can be read while it runs.
// Stop must come after every sender is done.
type Pipe interface {
	acker.Port
	// Start launches its goroutines.
	Start() error
	// Stats is a snapshot (at most a tick old) while running; exact
	// after Stop.
	Stats() ackcore.Stats
	// Placement says where its goroutines ran (xorack: the executors'
	// CPUs and the plan's note); nil and "" for the baselines.
	Placement() (cpus []int, note string)
}

// Impls names the pipelines, xorack first, in the order reports list them.
var Impls = []string{"xorack", "mutexmap", "chanshard"}

// New builds the pipeline named impl.
func New(impl string, cfg Config) (Pipe, error) {
	switch impl {
	case "xorack":
		return NewXorack(cfg)
	case "mutexmap":
		return NewMutexMap(cfg)
	case "chanshard":
		return NewChanShard(cfg)
	}
	return nil, fmt.Errorf("pipeline: unknown impl %q (want one of %v)", impl, Impls)
}

// validate is the one check of a Config: it fills Receivers (Tasks) and
// Batch (acker.DefaultBatch) and returns the filled copy, or an error
// naming the field and the value. The port shape is acker.Spec's to check.
func (c Config) validate() (Config, error) {
	if c.Receivers == 0 {
		c.Receivers = c.Tasks
	}
	c.Batch = cmp.Or(c.Batch, acker.DefaultBatch)
	switch {
	case c.Shards < 1:
		return c, fmt.Errorf("pipeline: Config.Shards %d below 1", c.Shards)
	case c.Batch < 1:
		return c, fmt.Errorf("pipeline: Config.Batch %d below 1", c.Batch)
	}
	return c, nil
}

// base is what the baselines share: their task -> inbox table and their
// life cycle, with the goroutine that expires roots every tick.
type base struct {
	name    string
	recvOf  []uint32
	tasks   uint32
	tick    time.Duration
	done    chan struct{} // closed when the loop returns
	started atomic.Bool
	closed  atomic.Bool // Stop began: sends fail
	once    sync.Once   // Stop's work
}

// init validates cfg, keeping the filled copy, and sets b up for it.
func (b *base) init(name string, cfg *Config) error {
	c, err := cfg.validate()
	if err != nil {
		return err
	}
	*cfg = c
	_, of, err := acker.Spec{Producers: cfg.Producers, Tasks: cfg.Tasks, Receivers: cfg.Receivers, ReceiverOf: cfg.ReceiverOf}.InboxTable()
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	b.name, b.recvOf, b.tasks = name, of, uint32(cfg.Tasks)
	b.tick, b.done = ackcore.DefaultTick, make(chan struct{})
	return nil
}

// start runs loop on a goroutine, once, with a ticker of the pipe's tick
// and a scratch buffer for outcomes; done closes when it returns.
func (b *base) start(loop func(tick <-chan time.Time, out []ackcore.Outcome)) error {
	if b.started.Swap(true) {
		return fmt.Errorf("pipeline: %s started twice", b.name)
	}
	go func() {
		defer close(b.done)
		t := time.NewTicker(b.tick)
		defer t.Stop()
		loop(t.C, make([]ackcore.Outcome, 0, scratchOutcomes))
	}()
	return nil
}

// scratchOutcomes is the capacity of a loop's scratch buffer for
// outcomes (it grows if a call needs more).
const scratchOutcomes = 1024

// expireDue reports the roots due at a tick: it hands each slice expire
// returns to deliver until expire says there are no more, reusing out,
// and returns out for the next use.
func expireDue(out []ackcore.Outcome, expire func([]ackcore.Outcome) ([]ackcore.Outcome, bool), deliver func([]ackcore.Outcome)) []ackcore.Outcome {
	for more := true; more; {
		out, more = expire(out[:0])
		deliver(out)
	}
	return out
}

// stop is a baseline's Stop, once: sends fail from then on, halt tells
// the loop to return and stop waits for it if it started; then closeOuts
// closes what the loop did not (started says whether it ran).
func (b *base) stop(halt func(), closeOuts func(started bool)) {
	b.once.Do(func() {
		b.closed.Store(true)
		halt()
		started := b.started.Load()
		if started {
			<-b.done
		}
		closeOuts(started)
	})
}

// check refuses m once the pipe stops, or for an INIT naming a task the
// pipe does not have.
func (b *base) check(m *ackcore.Msg) error {
	if b.closed.Load() {
		return acker.ErrClosed
	}
	if m.Kind == ackcore.Init && m.Task >= b.tasks {
		return fmt.Errorf("pipeline: INIT root %#x names task %d, %s has %d tasks", m.Root, m.Task, b.name, b.tasks)
	}
	return nil
}

// sendEach is SendBatch for a sender that takes one message at a time.
func sendEach(send func(ackcore.Msg) error, msgs []ackcore.Msg) error {
	for _, m := range msgs {
		if err := send(m); err != nil {
			return err
		}
	}
	return nil
}

// xorack: acker.Acker itself.

type xorackPipe struct{ *acker.Acker }

// NewXorack is acker.Acker: producers -> SPSC rings -> shard executors ->
// outcome rings -> receivers.
func NewXorack(cfg Config) (Pipe, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	a, err := acker.New(acker.Config{
		Shards: cfg.Shards, Spec: acker.Spec{Producers: cfg.Producers, Tasks: cfg.Tasks, Receivers: cfg.Receivers, ReceiverOf: cfg.ReceiverOf}, Batch: min(cfg.Batch, acker.DefaultRingSize), OutcomeRingSize: cfg.OutcomeRingSize, Pin: cfg.Pin, Idle: cfg.Idle,
		Shard: ackcore.Config{MaxPending: cfg.MaxPending, Timeout: cfg.Timeout, Clock: cfg.Clock},
	})
	if err != nil {
		return nil, err
	}
	return xorackPipe{a}, nil
}

func (x xorackPipe) Placement() ([]int, string) { return x.ShardCPUs(), x.Plan().Note }
