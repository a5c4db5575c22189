package topology

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// snapSpout emits ids [0, n) as tracked roots and, in each Ack (on the
// spout's executor, between two outcomes), reads the published metrics:
// a snapshot taken between outcomes counts each root emitted once, as
// completed or as pending.
type snapSpout struct {
	n, next int
	top     *atomic.Pointer[Topology]
	bad     *atomic.Pointer[string]
	acks    *atomic.Int64
}

func (s *snapSpout) Next(c *SpoutCollector) {
	if s.next >= s.n {
		c.Done()
		return
	}
	if err := c.Emit(s.next, s.next); err != nil {
		panic(err)
	}
	s.next++
}

func (s *snapSpout) Ack(any) {
	s.acks.Add(1)
	top := s.top.Load()
	if top == nil || s.bad.Load() != nil {
		return
	}
	c := top.Metrics().Component("src")
	if c.Completed+uint64(c.Pending) != c.Emitted {
		msg := fmt.Sprintf("published %d completed and %d pending of %d emitted, at ack %d", c.Completed, c.Pending, c.Emitted, s.acks.Load())
		s.bad.Store(&msg)
	}
}

func (s *snapSpout) Fail(any, *Failure) { panic("no root fails here") }

// burstAcker keeps its inputs and acks them hold at a time: their roots
// complete in bursts, more than maxLats outcomes at once.
type burstAcker struct {
	hold int
	kept []*Tuple
}

func (b *burstAcker) Execute(in *Tuple, c *BoltCollector) {
	if b.kept = append(b.kept, in); len(b.kept) == b.hold {
		for _, k := range b.kept {
			_ = c.Ack(k)
		}
		b.kept = b.kept[:0]
	}
}

// TestMetricsBetweenOutcomes: the spout executor publishes its counters
// between two outcomes, never inside one, and so also when its buffer of
// latencies fills (maxLats completions without a publish): published
// there, inside the outcome, a root counted completed was still counted
// pending (4,096 completed and 4,673 pending of 8,768 emitted). The clock
// does not move, so no publish falls due by it; the bolt acks in bursts
// of twice maxLats, and the spout, slowed by a read of the metrics per
// Ack, takes the outcomes in batches that fill the buffer before it idles.
func TestMetricsBetweenOutcomes(t *testing.T) {
	const n = 6 * maxLats
	var top atomic.Pointer[Topology]
	var bad atomic.Pointer[string]
	var acks atomic.Int64
	b := NewBuilder()
	b.Spout("src", func() Spout { return &snapSpout{n: n, top: &top, bad: &bad, acks: &acks} }).Output("id")
	b.Bolt("sink", func() Bolt { return &burstAcker{hold: 2 * maxLats} }).Input("src", Shuffle())
	cfg := testConfig()
	cfg.Clock = &ackcore.FakeClock{} // no publish falls due by the clock
	cfg.MaxSpoutPending = n
	built, err := b.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	top.Store(built)
	if err := built.Start(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, built, 60*time.Second)
	stop(t, built)
	if msg := bad.Load(); msg != nil {
		t.Fatal(*msg)
	}
	if got := acks.Load(); got != n {
		t.Fatalf("%d acks, want %d", got, n)
	}
}
