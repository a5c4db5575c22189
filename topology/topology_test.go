package topology

import (
	"testing"
	"time"
)

// fanout is a basic bolt that emits k children per input.
func fanout(k int) func() Bolt {
	return func() Bolt {
		return Basic(BasicFunc(func(t *Tuple, c *BasicCollector) error {
			for i := range k {
				if err := c.Emit(t.Int(0), i); err != nil {
					return err
				}
			}
			return nil
		}))
	}
}

// sink acks every input and records it in the ledger (child 0 only).
type sink struct{ l *ledger }

func (s *sink) Execute(t *Tuple, c *BoltCollector) {
	if t.Int(1) == 0 {
		s.l.process(t.Int(0), t.Attempt())
	}
	c.Ack(t)
}

func TestEndToEnd(t *testing.T) {
	for _, ackers := range []int{0, 1, 2} {
		t.Run(map[int]string{0: "ackers=0", 1: "ackers=1", 2: "ackers=2"}[ackers], func(t *testing.T) {
			const n = 5000
			l, b, ids := idSource(n)
			ids.Tasks(3).Executors(2)
			b.Bolt("fan", fanout(4)).Tasks(2).Input("ids", Shuffle()).Output("id", "k")
			b.Bolt("sink", func() Bolt { return &sink{l: l} }).Tasks(3).Executors(2).Input("fan", Fields("id"))
			cfg := testConfig()
			if ackers == 0 {
				cfg.AtMostOnce = true
			} else {
				cfg.Acker.Shards = ackers
			}
			top, err := b.Build(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := top.Start(); err != nil {
				t.Fatal(err)
			}
			waitDone(t, top, 30*time.Second)
			stop(t, top)
			s := l.check(t, n, false)
			if s.completed != n {
				t.Errorf("completed %d of %d", s.completed, n)
			}
			m := top.Metrics()
			sp := m.Component("ids")
			if sp.Completed != n || sp.Pending != 0 {
				t.Errorf("spout metrics: completed %d pending %d", sp.Completed, sp.Pending)
			}
			if got := m.Component("sink").Executed; got != 4*n {
				t.Errorf("sink executed %d, want %d", got, 4*n)
			}
			if ackers > 0 && sp.Latency.TotalCount() != n {
				t.Errorf("latency count %d", sp.Latency.TotalCount())
			}
		})
	}
}

func TestPinned(t *testing.T) {
	const n = 1000
	l, b := idsToSink(n)
	cfg := testConfig()
	cfg.Pin = true
	top := start(t, b, cfg)
	waitDone(t, top, 30*time.Second)
	stop(t, top)
	if s := l.check(t, n, false); s.completed != n {
		t.Errorf("completed %d", s.completed)
	}
	if p := top.Plan(); len(p.CPUs) != 2 && p.Note == "" {
		t.Errorf("pinned, yet the plan has %d CPUs for 2 executors and no note", len(p.CPUs))
	}
}
