package topology

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// countingHandler is a slog.Handler counting records by component.
type countingHandler struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "component" {
			h.n[a.Value.String()]++
		}
		return true
	})
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) lines(comp string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[comp]
}

// panicky is a basic bolt that panics on every attempt of ids ≡ 3 mod 10
// (after emitting a child) and acks the rest.
func panicky(t *Tuple, c *BasicCollector) error {
	if t.Int(0)%10 == 3 {
		_ = c.Emit(t.Int(0), 0)
		panic("bad record " + string(rune('0'+t.Int(0)%10)))
	}
	return nil
}

// TestPanicInExecute: a panic in a Basic function fails its input with
// ackcore.ReasonPanic, whose Failure carries the value and the stack; the
// topology runs on, every other message completes, the panics are
// counted per component and logged once per interval.
func TestPanicInExecute(t *testing.T) {
	const n = 1000
	h := &countingHandler{n: map[string]int{}}
	l, b, _ := idSource(n)
	b.Bolt("parse", func() Bolt { return Basic(BasicFunc(panicky)) }).Tasks(2).Input("ids", Shuffle()).Output("id", "k")
	b.Bolt("sink", func() Bolt { return nopBolt{} }).Input("parse", Shuffle())
	cfg := testConfig()
	cfg.Retry.MaxAttempts = 2
	cfg.Logger = slog.New(h)
	cfg.DeadLetter = l.deadLetter
	began := time.Now()
	top := start(t, b, cfg)
	waitDone(t, top, 30*time.Second)
	stop(t, top)
	took := time.Since(began)
	s := l.check(t, n, false)
	if s.completed != n-n/10 || s.deadLettered != n/10 {
		t.Errorf("completed %d, dead-lettered %d; want %d and %d", s.completed, s.deadLettered, n-n/10, n/10)
	}
	for id, ds := range l.dead {
		f := ds[0].Failure
		var pe *PanicError
		if f.Reason != ackcore.ReasonPanic || !errors.As(f.Err, &pe) || pe.Value != "bad record 3" || pe.Method != "Execute" ||
			pe.Component != "parse" || !strings.Contains(string(pe.Stack), "panicky") || f.Attempts != 2 {
			t.Fatalf("msg %d: failure %+v (%v)", id, f, f.Err)
		}
	}
	m := top.Metrics()
	p, sp := m.Component("parse"), m.Component("ids")
	if p.Panics != 2*n/10 || sp.FailedPanic != 2*n/10 || sp.FailedExplicit != 0 {
		t.Errorf("panics counted %d, spout failed attempts by panic %d, explicit %d; want %d, %d, 0", p.Panics, sp.FailedPanic, sp.FailedExplicit, 2*n/10, 2*n/10)
	}
	if got, most := h.lines("parse"), 1+int(took/panicLogEvery); got < 1 || got > most {
		t.Errorf("%d log lines for %d panics in %v, want 1 to %d (once per component and interval)", got, p.Panics, took, most)
	}
}

// panickySpout emits ids [0, n); its Next panics on every 7th call, its
// Ack on ids ≡ 1 mod 5 and its Fail always, each after the ledger saw
// the outcome.
type panickySpout struct {
	idSpout
	calls int
}

func (s *panickySpout) Next(c *SpoutCollector) {
	if s.calls++; s.calls%7 == 0 {
		panic("next")
	}
	s.idSpout.Next(c)
}

func (s *panickySpout) Ack(id any) {
	s.l.ack(id.(int))
	if id.(int)%5 == 1 {
		panic("ack")
	}
}

func (s *panickySpout) Fail(id any, f *Failure) {
	s.l.fail(id.(int), f)
	panic("fail")
}

// failOdd fails every attempt of odd ids.
type failOdd struct{}

func (failOdd) Execute(t *Tuple, c *BoltCollector) {
	if t.Int(0)%2 == 1 {
		_ = c.Fail(t, nil)
		return
	}
	_ = c.Ack(t)
}

// TestPanicInSpout: panics in a spout's Next, Ack, Fail and in the
// dead-letter hook are recovered and counted; every message still gets
// exactly one outcome and the spout's pending count returns to 0.
func TestPanicInSpout(t *testing.T) {
	l := newLedger()
	const n = 400
	b := NewBuilder()
	b.Spout("ids", func() Spout { return &panickySpout{idSpout: idSpout{l: l, n: n}} }).Output("id")
	b.Bolt("odd", func() Bolt { return failOdd{} }).Input("ids", Shuffle())
	cfg := testConfig()
	cfg.Retry.MaxAttempts = 1
	cfg.Logger = slog.New(&countingHandler{n: map[string]int{}})
	var hooks atomic.Int64
	cfg.DeadLetter = func(d DeadLetter) {
		l.deadLetter(d)
		hooks.Add(1)
		panic("hook")
	}
	top := start(t, b, cfg)
	waitDone(t, top, 30*time.Second)
	stop(t, top)
	s := l.check(t, n, false)
	sp := top.Metrics().Component("ids")
	// Fail panics n/2 times, the hook n/2, Ack n/10 times, Next at least
	// once per 7 calls of the n+1 it needed at the least.
	if min := uint64(n/2 + n/2 + n/10 + (n+1)/7); s.completed != n/2 || s.deadLettered != n/2 || sp.Panics < min || sp.Pending != 0 {
		t.Errorf("completed %d, dead %d, panics %d (want >= %d), pending %d", s.completed, s.deadLettered, sp.Panics, min, sp.Pending)
	}
}

// panicOpenClose panics in Open or Close.
type panicOpenClose struct {
	nopBolt
	inOpen bool
}

func (p panicOpenClose) Open(TaskContext) error {
	if p.inOpen {
		panic("open")
	}
	return nil
}

func (p panicOpenClose) Close() error {
	panic("close")
}

// TestPanicInOpenClose: a panic in Open fails Start, in Close fails
// Stop, each with the *PanicError.
func TestPanicInOpenClose(t *testing.T) {
	for _, inOpen := range []bool{true, false} {
		l := newLedger()
		b := NewBuilder()
		b.Spout("ids", newIDSpout(l, 10)).Output("id")
		b.Bolt("b", func() Bolt { return panicOpenClose{inOpen: inOpen} }).Input("ids", Shuffle())
		top, err := b.Build(testConfig())
		if err != nil {
			t.Fatal(err)
		}
		var pe *PanicError
		err = top.Start()
		if inOpen {
			if !errors.As(err, &pe) || pe.Method != "Open" || pe.Value != "open" || top.Metrics().Component("b").Panics != 1 {
				t.Errorf("Start: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		waitDone(t, top, 30*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err = top.Stop(ctx)
		cancel()
		if !errors.As(err, &pe) || pe.Method != "Close" || pe.Value != "close" || !strings.Contains(err.Error(), `bolt "b" task 1: panic in Close: close`) {
			t.Errorf("Stop: %v", err)
		}
		if c := top.Metrics().Component("b"); c.Panics != 1 {
			t.Errorf("panics counted %d", c.Panics)
		}
		l.check(t, 10, false)
	}
}

// TestPanicStops: with Config.PanicStops, the first panic closes Done,
// Err and Stop return it, and every message still has its one outcome.
func TestPanicStops(t *testing.T) {
	const n = 100_000
	l, b, _ := idSource(n)
	b.Bolt("parse", func() Bolt { return Basic(BasicFunc(panicky)) }).Input("ids", Shuffle()).Output("id", "k")
	b.Bolt("sink", func() Bolt { return nopBolt{} }).Input("parse", Shuffle())
	cfg := testConfig()
	cfg.PanicStops = true
	cfg.Logger = slog.New(&countingHandler{n: map[string]int{}})
	top := start(t, b, cfg)
	waitDone(t, top, 30*time.Second)
	var pe *PanicError
	if err := top.Err(); !errors.As(err, &pe) || pe.Method != "Execute" {
		t.Fatalf("Err after Done: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := top.Stop(ctx); !errors.As(err, &pe) {
		t.Errorf("Stop: %v, want the panic", err)
	}
	emitted := int(top.Metrics().Component("ids").Emitted)
	if emitted >= n {
		t.Errorf("all %d emitted: the panic did not stop the spout", emitted)
	}
	if s := l.check(t, emitted, true); s.stopped == 0 {
		t.Errorf("no message reported stopped")
	}
}
