package topology

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// tickSpout emits nTrees tracked ids, then an untracked tick for each
// value on ticks.
type tickSpout struct {
	l      *ledger
	nTrees int
	next   int
	ticks  chan struct{}
}

func (s *tickSpout) Next(c *SpoutCollector) {
	if s.next < s.nTrees {
		_ = c.Emit(s.next, s.next)
		s.next++
		return
	}
	select {
	case <-s.ticks:
		_ = c.On("tick").Emit(nil, 0)
	default:
	}
}
func (s *tickSpout) Ack(id any)              { s.l.ack(id.(int)) }
func (s *tickSpout) Fail(id any, f *Failure) { s.l.fail(id.(int), f) }

// dripBolt is a slow bolt: it holds every tracked tuple and acks one per
// tick, taking the trees in turn (each tree progresses every nTrees
// ticks); it never acks the last tuple of tree stuck.
type dripBolt struct {
	mu    *sync.Mutex
	held  map[int][]*Tuple // by tree
	count *atomic.Int64    // tuples held
	turn  int
	trees int
	stuck int
}

func (d *dripBolt) Execute(t *Tuple, c *BoltCollector) {
	if t.Stream() != "tick" {
		d.mu.Lock()
		d.held[t.Int(0)] = append(d.held[t.Int(0)], t)
		d.mu.Unlock()
		d.count.Add(1)
		return
	}
	_ = c.Ack(t)
	d.mu.Lock()
	defer d.mu.Unlock()
	for range d.trees {
		id := d.turn
		d.turn = (d.turn + 1) % d.trees
		if h := d.held[id]; len(h) > 0 && !(id == d.stuck && len(h) == 1) {
			_ = c.Ack(h[0])
			d.held[id] = h[1:]
			return
		}
	}
}

// TestProgressTimeout: with Config.ProgressTimeout, trees that progress
// behind a slow bolt (one ack of each every 400 ms, 3.1 s in all) do not
// time out at their 1 s timeout; a tree with one tuple stuck times out one
// timeout after its last progress. The clock is the test's (each tick
// moves it 100 ms); off, the same trees time out at 1 s. The in-process
// acker follows progress itself (no RESETs); an acker behind Config.Port
// (here an acker.Acker without the option) is told by the bolts' RESETs.
func TestProgressTimeout(t *testing.T) {
	for _, mode := range []string{"in-process", "port", "off"} {
		on := mode != "off"
		l := newLedger()
		clock := &ackcore.FakeClock{}
		ticks := make(chan struct{})
		var held atomic.Int64
		const trees, fan, stuck = 4, 8, 3
		b := NewBuilder()
		b.Spout("ids", func() Spout { return &tickSpout{l: l, nTrees: trees, ticks: ticks} }).Output("id").Stream("tick", "x")
		b.Bolt("fan", fanout(fan)).Input("ids", Shuffle()).Output("id", "k")
		b.Bolt("drip", func() Bolt {
			return &dripBolt{mu: &sync.Mutex{}, held: map[int][]*Tuple{}, count: &held, trees: trees, stuck: stuck}
		}).Input("fan", Global()).InputStream("ids", "tick", Global())
		cfg := testConfig()
		cfg.Clock = clock
		cfg.MessageTimeout = time.Second
		cfg.ProgressTimeout = on
		cfg.Retry.MaxAttempts = 1
		cfg.Batch = 1
		cfg.DeadLetter = l.deadLetter
		if mode == "port" {
			cfg.Port = func(spec acker.Spec) (acker.Port, error) {
				a, err := acker.New(acker.Config{Spec: acker.Spec{Producers: spec.Producers, Tasks: spec.Tasks, Receivers: spec.Receivers, ReceiverOf: spec.ReceiverOf}, Shard: ackcore.Config{MaxPending: 1024, Timeout: cfg.MessageTimeout, Clock: clock}})
				if err == nil {
					err = a.Start()
				}
				return a, err
			}
		}
		top := start(t, b, cfg)
		acks := func() uint64 {
			if a := top.Metrics().Acker; a != nil {
				return a.Acks
			}
			return 0
		}
		waitFor(t, 10*time.Second, "every tuple held", func() bool { return held.Load() == trees*fan && acks() == trees })
		// 31 ticks ack every tuple but the stuck one: tree 3's last at tick
		// 28 (2.8 s), the others complete at ticks 29-31.
		for i := 1; i <= trees*fan-1; i++ {
			clock.Set(time.Duration(i) * 100 * time.Millisecond)
			ticks <- struct{}{}
			if !on {
				break
			}
			waitFor(t, 10*time.Second, "the tick's ack", func() bool { return acks() == uint64(trees+i) })
		}
		if !on {
			clock.Set(1100 * time.Millisecond) // past every tree's 1 s deadline
			waitFor(t, 10*time.Second, "the timeouts", func() bool { l.mu.Lock(); defer l.mu.Unlock(); return len(l.failed) == trees })
			stop(t, top)
			if s := l.check(t, trees, false); s.deadLettered != trees {
				t.Errorf("off: %d of %d trees timed out", s.deadLettered, trees)
			}
			continue
		}
		waitFor(t, 10*time.Second, "the progressing trees", func() bool { l.mu.Lock(); defer l.mu.Unlock(); return len(l.acked) == trees-1 })
		if l.mu.Lock(); len(l.failed) != 0 {
			t.Errorf("a tree failed while progressing: %v", l.failed)
		}
		l.mu.Unlock()
		clock.Set(3800 * time.Millisecond) // one timeout after tree 3's last progress
		waitFor(t, 10*time.Second, "the stuck tree's timeout", func() bool { l.mu.Lock(); defer l.mu.Unlock(); return len(l.failed) == 1 })
		stop(t, top)
		s := l.check(t, trees, false)
		f := l.failed[stuck][0]
		if s.completed != trees-1 || f.Reason != ackcore.ReasonTimeout || f.Latency != 3800*time.Millisecond {
			t.Errorf("completed %d of %d; the stuck tree: %+v, want a timeout at 3.8 s", s.completed, trees-1, f)
		}
		if d := top.Metrics().Component("drip"); mode == "port" && d.Resets == 0 {
			t.Error("port: no RESETs sent")
		} else if mode == "in-process" && d.Resets != 0 {
			t.Errorf("in-process: %d RESETs sent, though the acker follows progress itself", d.Resets)
		}
	}
}
