package topology

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/xorack/xorack/ackcore"
)

// A traced tuple costs the others nothing but a pointer, and the pointer
// keeps Tuple in the 128-byte size class.
func TestTupleSize(t *testing.T) {
	if n := unsafe.Sizeof(Tuple{}); n > 128 {
		t.Errorf("Tuple is %d bytes, over the 128-byte size class", n)
	}
}

// holdOne is a bolt that acks every tuple but the one whose word is
// "stuck", which it keeps (counting it in held): the tree times out.
type holdOne struct {
	kept []*Tuple
	held *atomic.Int32
}

func (h *holdOne) Execute(in *Tuple, c *BoltCollector) {
	if in.Values()[0] == "stuck" {
		h.kept = append(h.kept, in)
		h.held.Add(1)
		return
	}
	_ = c.Ack(in)
}

// TestTraceNamesTheHolder: a root whose tree times out because one bolt
// task never acks one tuple says so in its Failure: the task, how many
// tuples, since when (the engine clock's time since the delivery); and
// the bolt's TimeoutsHeld counts it.
func TestTraceNamesTheHolder(t *testing.T) {
	var mu sync.Mutex
	var fails []*Failure
	var held atomic.Int32
	b := NewBuilder()
	b.Spout("sentences", func() Spout {
		return &oneSentence{s: "a stuck sentence", fail: func(f *Failure) { mu.Lock(); fails = append(fails, f); mu.Unlock() }}
	}).Output("sentence")
	b.Bolt("split", splitWords).Input("sentences", Shuffle()).Output("word")
	b.Bolt("count", func() Bolt { return &holdOne{held: &held} }).Tasks(2).Input("split", Fields("word"))
	// Timed out once the stuck word is kept and the other two are acked.
	top := runTraced(t, b, func(m Metrics) bool { return held.Load() == 1 && m.Component("count").Acked == 2 })
	mu.Lock()
	defer mu.Unlock()
	if len(fails) != 1 {
		t.Fatalf("%d failures, want 1", len(fails))
	}
	f := fails[0]
	if f.Reason != ackcore.ReasonTimeout || !f.Traced || len(f.Held) != 1 {
		t.Fatalf("failure %+v: want a traced timeout held in one place", f)
	}
	h := f.Held[0]
	countTasks := top.comps[2].tasks
	if h.Component != "count" || h.Task < countTasks[0] || h.Task > countTasks[1] || h.Tuples != 1 || !h.Delivered || h.Lost ||
		h.For != traceAge {
		t.Errorf("held %+v: want 1 tuple delivered to a count task %v before the timeout was seen", h, traceAge)
	}
	if msg, want := f.Error(), fmt.Sprintf("held by count[%d]: 1 tuple delivered 1.5 s ago, not acked", h.Task); !strings.HasSuffix(msg, want) {
		t.Errorf("Error() = %q, want it to end %q", msg, want)
	}
	m := top.Metrics()
	if got := m.Component("count").TimeoutsHeld; got != 1 {
		t.Errorf("count TimeoutsHeld %d, want 1", got)
	}
	if got := m.Component("split").TimeoutsHeld; got != 0 {
		t.Errorf("split TimeoutsHeld %d, want 0 (it acked its tuple)", got)
	}
}

// TestHeldString: the wording of each state.
func TestHeldString(t *testing.T) {
	for _, c := range []struct {
		h    Held
		want string
	}{
		{Held{Component: "split", Task: 3, Tuples: 1, Delivered: true, For: 29800 * time.Millisecond}, "split[3]: 1 tuple delivered 29.8 s ago, not acked"},
		{Held{Component: "count", Task: 1, Tuples: 2, For: 1500 * time.Millisecond}, "in ring to count[1]: 2 tuples for 1.5 s"},
		{Held{Component: "count", Task: 5, Tuples: 1, Lost: true, For: 2 * time.Second}, "lost on the way to count[5]: 1 tuple, 2.0 s ago"},
	} {
		if got := c.h.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.h, got, c.want)
		}
	}
}

// oneSentence emits one sentence, then is done.
type oneSentence struct {
	s    string
	sent bool
	fail func(*Failure)
}

func (o *oneSentence) Next(c *SpoutCollector) {
	if o.sent {
		c.Done()
		return
	}
	o.sent = true
	if err := c.Emit(1, o.s); err != nil {
		panic(err)
	}
}
func (o *oneSentence) Ack(any)                { panic("the tree cannot complete") }
func (o *oneSentence) Fail(_ any, f *Failure) { o.fail(f) }

// blockOn blocks in Execute on the word "stuck" (setting blocked) until
// release is closed, and acks everything.
type blockOn struct {
	release chan struct{}
	blocked *atomic.Bool
}

func (b *blockOn) Execute(in *Tuple, c *BoltCollector) {
	if in.Values()[0] == "stuck" {
		b.blocked.Store(true)
		<-b.release
	}
	_ = c.Ack(in)
}

// TestTraceInRing: the tuples queued behind a bolt that is stuck in
// Execute are named as on their way to it.
func TestTraceInRing(t *testing.T) {
	release := make(chan struct{})
	var f *Failure
	var blocked atomic.Bool
	b := NewBuilder()
	b.Spout("sentences", func() Spout {
		return &oneSentence{s: "stuck a b", fail: func(g *Failure) { f = g; close(release) }}
	}).Output("sentence")
	b.Bolt("split", splitWords).Input("sentences", Shuffle()).Output("word")
	b.Bolt("count", func() Bolt { return &blockOn{release: release, blocked: &blocked} }).Input("split", Shuffle())
	// Timed out once count is stuck in Execute and split has emitted the
	// other two words (acked its input).
	top := runTraced(t, b, func(m Metrics) bool { return blocked.Load() && m.Component("split").Acked == 1 })
	if f == nil || !f.Traced || len(f.Held) != 2 {
		t.Fatalf("failure %+v: want a traced timeout held in two places", f)
	}
	task := top.comps[2].tasks[0]
	want := []Held{{Component: "count", Task: task, Tuples: 1, Delivered: true, For: traceAge}, {Component: "count", Task: task, Tuples: 2, For: traceAge}}
	for i := range want {
		if got := f.Held[i]; got != want[i] {
			t.Errorf("held[%d] %+v, want %+v", i, got, want[i])
		}
	}
	if msg := f.Error(); !strings.Contains(msg, "; in ring to count[") {
		t.Errorf("Error() = %q", msg)
	}
}

// splitWords is a basic bolt that emits each word of its input.
func splitWords() Bolt {
	return Basic(BasicFunc(func(in *Tuple, c *BasicCollector) error {
		for _, w := range strings.Fields(in.Values()[0].(string)) {
			if err := c.Emit(w); err != nil {
				return err
			}
		}
		return nil
	}))
}

// traceAge is how far runTraced moves the engine clock once the tree is
// where the test wants it: past the 50 ms timeout, and how long before
// the timeout was seen every tuple that did not move since has been
// where it is.
const traceAge = 1500 * time.Millisecond

// runTraced runs b to the end with every root traced, a 50 ms timeout and
// no replays, on an engine clock that stands still until the acker has
// the root and ready says the tree is in the place under test (the
// published metrics are handed to it): then it moves by traceAge and the
// root times out. (On the wall
// clock, a busy machine that ran the spout or split late timed the tree
// out before its tuples got there.)
func runTraced(t *testing.T, b *Builder, ready func(Metrics) bool) *Topology {
	t.Helper()
	clock := &ackcore.FakeClock{}
	cfg := testConfig()
	cfg.Clock = clock
	cfg.MessageTimeout = 50 * time.Millisecond
	cfg.Retry.MaxAttempts = 1
	cfg.TraceEvery = 1
	top := start(t, b, cfg)
	waitFor(t, 10*time.Second, "the tree in place", func() bool {
		// The root's INIT applied too: its deadline is read from the
		// clock then.
		m := top.Metrics()
		return m.Acker != nil && m.Acker.Inits == 1 && ready(m)
	})
	clock.Set(traceAge)
	waitDone(t, top, 10*time.Second)
	stop(t, top)
	return top
}
