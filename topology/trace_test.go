package topology

import (
	"strings"
	"sync"
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
// "stuck", which it keeps: the tree times out.
type holdOne struct{ kept []*Tuple }

func (h *holdOne) Execute(in *Tuple, c *BoltCollector) {
	if in.Values()[0] == "stuck" {
		h.kept = append(h.kept, in)
		return
	}
	_ = c.Ack(in)
}

// TestTraceNamesTheHolder: a root whose tree times out because one bolt
// task never acks one tuple says so in its Failure: the task, how many
// tuples, since when; and the bolt's TimeoutsHeld counts it.
func TestTraceNamesTheHolder(t *testing.T) {
	var mu sync.Mutex
	var fails []*Failure
	b := NewBuilder()
	b.Spout("sentences", func() Spout {
		return &oneSentence{s: "a stuck sentence", fail: func(f *Failure) { mu.Lock(); fails = append(fails, f); mu.Unlock() }}
	}).Output("sentence")
	b.Bolt("split", splitWords).Input("sentences", Shuffle()).Output("word")
	b.Bolt("count", func() Bolt { return &holdOne{} }).Tasks(2).Input("split", Fields("word"))
	top := runTraced(t, b)
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
		h.For < 40*time.Millisecond || h.For > 10*time.Second {
		t.Errorf("held %+v: want 1 tuple delivered to a count task for about the timeout", h)
	}
	if msg := f.Error(); !strings.Contains(msg, "held by count[") || !strings.Contains(msg, ": 1 tuple delivered ") ||
		!strings.HasSuffix(msg, " s ago, not acked") {
		t.Errorf("Error() = %q", msg)
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

// blockOn blocks in Execute on the word "stuck" until release is closed,
// and acks everything.
type blockOn struct{ release chan struct{} }

func (b *blockOn) Execute(in *Tuple, c *BoltCollector) {
	if in.Values()[0] == "stuck" {
		<-b.release
	}
	_ = c.Ack(in)
}

// TestTraceInRing: the tuples queued behind a bolt that is stuck in
// Execute are named as on their way to it.
func TestTraceInRing(t *testing.T) {
	release := make(chan struct{})
	var f *Failure
	b := NewBuilder()
	b.Spout("sentences", func() Spout {
		return &oneSentence{s: "stuck a b", fail: func(g *Failure) { f = g; close(release) }}
	}).Output("sentence")
	b.Bolt("split", splitWords).Input("sentences", Shuffle()).Output("word")
	b.Bolt("count", func() Bolt { return &blockOn{release: release} }).Input("split", Shuffle())
	top := runTraced(t, b)
	if f == nil || !f.Traced || len(f.Held) != 2 {
		t.Fatalf("failure %+v: want a traced timeout held in two places", f)
	}
	task := top.comps[2].tasks[0]
	want := []Held{{Component: "count", Task: task, Tuples: 1, Delivered: true}, {Component: "count", Task: task, Tuples: 2}}
	for i := range want {
		got := f.Held[i]
		got.For = 0
		if got != want[i] {
			t.Errorf("held[%d] %+v, want %+v", i, f.Held[i], want[i])
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

// runTraced runs b to the end with every root traced, a 50 ms timeout and
// no replays.
func runTraced(t *testing.T, b *Builder) *Topology {
	t.Helper()
	cfg := testConfig()
	cfg.MessageTimeout = 50 * time.Millisecond
	cfg.Retry.MaxAttempts = 1
	cfg.TraceEvery = 1
	top, err := b.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	top.Start()
	waitDone(t, top, 10*time.Second)
	stop(t, top)
	return top
}
