package topology

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/affinity"
)

type nopSpout struct{}

func (nopSpout) Next(c *SpoutCollector) { c.Done() }
func (nopSpout) Ack(any)                {}
func (nopSpout) Fail(any, *Failure)     {}

type nopBolt struct{}

func (nopBolt) Execute(t *Tuple, c *BoltCollector) { c.Ack(t) }

func TestBuildErrors(t *testing.T) {
	sp := func() Spout { return nopSpout{} }
	bo := func() Bolt { return nopBolt{} }
	for _, tc := range []struct {
		name  string
		build func(b *Builder)
		want  string
	}{
		{"duplicate", func(b *Builder) {
			b.Spout("s", sp).Output("x")
			b.Bolt("s", bo).Input("s", Shuffle())
		}, `duplicate component name "s"`},
		{"unknown component", func(b *Builder) {
			b.Spout("s", sp).Output("x")
			b.Bolt("b", bo).Input("nope", Shuffle())
		}, `bolt "b" subscribes to unknown component "nope"`},
		{"unknown stream", func(b *Builder) {
			b.Spout("s", sp).Output("x")
			b.Bolt("b", bo).InputStream("s", "errors", Shuffle())
		}, `stream "errors" of "s", which declares no such stream (it declares: default)`},
		{"undeclared field", func(b *Builder) {
			b.Spout("s", sp).Output("word")
			b.Bolt("b", bo).Input("s", Fields("wrod"))
		}, `fields grouping on "wrod", which the stream does not declare`},
		{"cycle", func(b *Builder) {
			b.Spout("s", sp).Output("x")
			b.Bolt("a", bo).Input("s", Shuffle()).Input("c", Shuffle()).Output("x")
			b.Bolt("c", bo).Input("a", Shuffle()).Output("x")
		}, `cycle a -> c -> a`},
		{"no inputs", func(b *Builder) {
			b.Spout("s", sp).Output("x")
			b.Bolt("b", bo)
		}, `bolt "b" has no inputs`},
		{"no spout", func(b *Builder) {
			b.Bolt("b", bo).Input("b", Shuffle())
		}, `no spout`},
		{"executors exceed tasks", func(b *Builder) {
			b.Spout("s", sp).Executors(4).Tasks(2).Output("x")
		}, `spout "s": executors 4 exceed tasks 2`},
		{"direct on plain stream", func(b *Builder) {
			b.Spout("s", sp).Output("x")
			b.Bolt("b", bo).Input("s", Direct())
		}, `direct grouping on a stream not declared with DirectStream`},
		{"shuffle on direct stream", func(b *Builder) {
			b.Spout("s", sp).DirectStream("d", "x")
			b.Bolt("b", bo).InputStream("s", "d", Shuffle())
		}, `shuffle grouping on a direct stream`},
		{"spout input", func(b *Builder) {
			b.Spout("s", sp).Output("x").Input("s", Shuffle())
		}, `spout "s": a spout cannot subscribe`},
		{"nil constructor", func(b *Builder) {
			b.Spout("s", nil).Output("x")
		}, `spout "s": nil constructor`},
		{"bad tasks", func(b *Builder) {
			b.Spout("s", sp).Tasks(0).Output("x")
		}, `spout "s": tasks 0 out of range`},
		{"repeated field", func(b *Builder) {
			b.Spout("s", sp).Output("x", "x")
		}, `stream "default": field name "x" empty or repeated`},
		{"no grouping", func(b *Builder) {
			b.Spout("s", sp).Output("x")
			b.Bolt("b", bo).Input("s", Grouping{})
		}, `no grouping`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuilder()
			tc.build(b)
			_, err := b.Build(Config{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Acker: acker.Config{Shards: -1}}, "Acker.Shards -1"},
		{Config{Acker: acker.Config{Shard: ackcore.Config{MaxPending: -1}}}, "Acker.Shard.MaxPending -1"},
		{Config{Acker: acker.Config{Spec: acker.Spec{Producers: 3}}}, "Acker.Producers is set"},
		{Config{Acker: acker.Config{Spec: acker.Spec{Tasks: 3}}}, "Acker.Tasks is set"},
		{Config{Acker: acker.Config{Spec: acker.Spec{Receivers: 3}}}, "Acker.Receivers is set"},
		{Config{Acker: acker.Config{Spec: acker.Spec{ReceiverOf: func(int) int { return 0 }}}}, "Acker.ReceiverOf is set"},
		{Config{Acker: acker.Config{Planner: affinity.NewPlanner(affinity.Topology{})}}, "Acker.Planner is set"},
		{Config{Acker: acker.Config{Shard: ackcore.Config{Timeout: time.Second}}}, "Acker.Shard.Timeout is set"},
		{Config{Acker: acker.Config{Shard: ackcore.Config{Clock: &ackcore.FakeClock{}}}}, "Acker.Shard.Clock is set"},
		{Config{Acker: acker.Config{Shard: ackcore.Config{ProgressTimeout: true}}}, "Acker.Shard.ProgressTimeout is set"},
		{Config{Acker: acker.Config{Shard: ackcore.Config{ProgressCap: time.Second}}}, "Acker.Shard.ProgressCap is set"},
		{Config{AtMostOnce: true, Acker: acker.Config{Shards: 2}}, "AtMostOnce with Acker set"},
		{Config{AtMostOnce: true, Port: func(acker.Spec) (acker.Port, error) { return nil, nil }}, "AtMostOnce with Port set"},
		{Config{Acker: acker.Config{Shards: 2}, Port: func(acker.Spec) (acker.Port, error) { return nil, nil }}, "Port and Acker both set"},
		// The acker's own check, at Build: its ring, backlog and byte bounds.
		{Config{Acker: acker.Config{RingSize: 1000}}, "Acker: acker: Config.RingSize 1000"},
		{Config{Acker: acker.Config{Backlog: -1}}, "Acker: acker: Config.Backlog -1"},
		{Config{Acker: acker.Config{MaxBytes: 1 << 10}}, "over MaxBytes"},
		{Config{MessageTimeout: 1500 * time.Microsecond}, "MessageTimeout 1.5ms"},
		{Config{RingSize: 1000}, "RingSize 1000"},
		{Config{MaxSpoutPending: -3}, "MaxSpoutPending -3"},
		{Config{Retry: RetryPolicy{Jitter: 2}}, "Retry.Jitter 2"},
		{Config{Breaker: Breaker{FailureRate: 1.5}}, "Breaker.FailureRate 1.5"},
		{Config{MessageTimeout: time.Second, ResetCap: time.Millisecond}, "ResetCap 1ms"},
		{Config{Adaptive: Adaptive{TargetP99: time.Millisecond, Min: 5000}}, "Adaptive.Min 5000"},
	} {
		b := NewBuilder()
		b.Spout("s", func() Spout { return nopSpout{} }).Output("x")
		if _, err := b.Build(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// taskRecorder records which task got which id.
type taskRecorder struct {
	mu  *sync.Mutex
	got map[int][]int // task -> ids
}

func (r taskRecorder) Execute(t *Tuple, c *BoltCollector) {
	r.mu.Lock()
	r.got[c.Task()] = append(r.got[c.Task()], t.Int(0))
	r.mu.Unlock()
	c.Ack(t)
}

// directBolt forwards each id to task id mod 3 of "d" via EmitDirect.
type directBolt struct{ tasks []int }

func (d *directBolt) Open(ctx TaskContext) error {
	d.tasks = ctx.ComponentTasks("direct")
	return nil
}

func (d *directBolt) Execute(t *Tuple, c *BoltCollector) {
	if err := c.On("d").EmitDirect(d.tasks[t.Int(0)%3], t, t.Int(0)); err != nil {
		panic(err)
	}
	c.Ack(t)
}

func TestGroupings(t *testing.T) {
	const n = 3000
	l := newLedger()
	var mu sync.Mutex
	recs := map[string]taskRecorder{}
	rec := func(name string) func() Bolt {
		r := taskRecorder{mu: &mu, got: map[int][]int{}}
		recs[name] = r
		return func() Bolt { return r }
	}
	b := NewBuilder()
	b.Spout("ids", newIDSpout(l, n)).Tasks(2).Executors(2).Output("id")
	b.Bolt("shuffle", rec("shuffle")).Tasks(3).Input("ids", Shuffle())
	b.Bolt("fields", rec("fields")).Tasks(3).Input("ids", Fields("id"))
	b.Bolt("all", rec("all")).Tasks(3).Input("ids", All())
	b.Bolt("global", rec("global")).Tasks(3).Input("ids", Global())
	b.Bolt("local", rec("local")).Tasks(4).Executors(2).Input("ids", LocalOrShuffle())
	b.Bolt("fwd", func() Bolt { return &directBolt{} }).Input("ids", Shuffle()).DirectStream("d", "id")
	b.Bolt("direct", rec("direct")).Tasks(3).InputStream("fwd", "d", Direct())
	top := start(t, b, testConfig())
	waitDone(t, top, 30*time.Second)
	stop(t, top)
	if s := l.check(t, n, false); s.completed != n {
		t.Fatalf("completed %d", s.completed)
	}
	tasks := func(name string) []int { return top.byName[name].tasks }
	mu.Lock()
	defer mu.Unlock()
	count := func(name string) map[int]int {
		c := map[int]int{}
		for task, ids := range recs[name].got {
			c[task] = len(ids)
		}
		return c
	}
	// Shuffle: round robin per emitter, so within 1 per emitter executor.
	for _, task := range tasks("shuffle") {
		if c := count("shuffle")[task]; c < n/3-2 || c > n/3+2 {
			t.Errorf("shuffle: task %d got %d of %d", task, c, n)
		}
	}
	// Fields: each id at one task; every task some.
	where := map[int]int{}
	for task, ids := range recs["fields"].got {
		for _, id := range ids {
			if w, ok := where[id]; ok && w != task {
				t.Errorf("fields: id %d at tasks %d and %d", id, w, task)
			}
			where[id] = task
		}
	}
	if len(where) != n || len(recs["fields"].got) != 3 {
		t.Errorf("fields: %d ids over %d tasks", len(where), len(recs["fields"].got))
	}
	for _, task := range tasks("all") {
		if c := count("all")[task]; c != n {
			t.Errorf("all: task %d got %d, want %d", task, c, n)
		}
	}
	if c := count("global"); c[tasks("global")[0]] != n || len(c) != 1 {
		t.Errorf("global: %v", c)
	}
	// Local: spout executor 0 (task 0, even ids) pairs with local executor
	// 0 (the first two tasks), executor 1 with the last two.
	lt := tasks("local")
	for task, ids := range recs["local"].got {
		for _, id := range ids {
			if want := id % 2; (task == lt[0] || task == lt[1]) != (want == 0) {
				t.Fatalf("local-or-shuffle: id %d (spout executor %d) at task %d", id, want, task)
			}
		}
	}
	dt := tasks("direct")
	for task, ids := range recs["direct"].got {
		for _, id := range ids {
			if dt[id%3] != task {
				t.Fatalf("direct: id %d at task %d, want %d", id, task, dt[id%3])
			}
		}
	}
	if c := top.Metrics().Component("direct").Executed; c != n {
		t.Errorf("direct executed %d", c)
	}
}

// emitErrSpout tries emits that must fail, recording the errors.
type emitErrSpout struct {
	errs *[]error
	once bool
}

func (s *emitErrSpout) Next(c *SpoutCollector) {
	if !s.once {
		s.once = true
		*s.errs = append(*s.errs,
			c.Emit(1, "a", "b"),                   // arity
			c.On("nope").Emit(1, "a"),             // undeclared stream
			c.On("d").Emit(1, "a"),                // direct stream without EmitDirect
			c.Emit(1, []int{1}),                   // unhashable field value
			c.On("d").EmitDirect(9999, 1, "a"),    // task not subscribed
			c.On("default").EmitDirect(0, 1, "a"), // EmitDirect on a plain stream
		)
	}
	c.Done()
}
func (s *emitErrSpout) Ack(any)            {}
func (s *emitErrSpout) Fail(any, *Failure) {}

func TestEmitErrors(t *testing.T) {
	var errs []error
	b := NewBuilder()
	b.Spout("s", func() Spout { return &emitErrSpout{errs: &errs} }).Output("w").DirectStream("d", "w")
	b.Bolt("b", func() Bolt { return nopBolt{} }).Input("s", Fields("w"))
	b.Bolt("c", func() Bolt { return nopBolt{} }).InputStream("s", "d", Direct())
	top := start(t, b, testConfig())
	waitDone(t, top, 10*time.Second)
	stop(t, top)
	want := []string{"emits 2 values on stream \"default\", which declares 1", "undeclared stream \"nope\"",
		"stream \"d\" is direct", "[]int is not comparable", "task 9999, which does not subscribe", "not declared direct"}
	for i, w := range want {
		if i >= len(errs) || errs[i] == nil || !strings.Contains(errs[i].Error(), w) {
			t.Errorf("emit error %d: %v, want %q", i, errs[i], w)
		}
	}
	if m := top.Metrics().Component("s"); m.Pending != 0 || m.Emitted != 0 {
		t.Errorf("failed emits left pending %d emitted %d", m.Pending, m.Emitted)
	}
}

// resetSpout emits one tracked message, then an untracked tick for each
// value on ticks.
type resetSpout struct {
	l     *ledger
	ticks chan string
	sent  bool
}

func (s *resetSpout) Next(c *SpoutCollector) {
	if !s.sent {
		s.sent = true
		_ = c.Emit(0, 0)
		return
	}
	select {
	case what := <-s.ticks:
		_ = c.On("tick").Emit(nil, what)
	default:
	}
}
func (s *resetSpout) Ack(id any)              { s.l.ack(id.(int)) }
func (s *resetSpout) Fail(id any, f *Failure) { s.l.fail(id.(int), f) }

// holder holds the tracked tuple; a "reset" tick resets it, "ack" acks it.
type holder struct{ held *Tuple }

func (h *holder) Execute(t *Tuple, c *BoltCollector) {
	if t.Stream() == DefaultStream {
		h.held = t
		return
	}
	switch t.String(0) {
	case "reset":
		c.Reset(h.held)
	case "ack":
		c.Ack(h.held)
	}
	c.Ack(t)
}

func TestResetCapAndLateAck(t *testing.T) {
	l := newLedger()
	clock := &ackcore.FakeClock{}
	ticks := make(chan string)
	b := NewBuilder()
	b.Spout("s", func() Spout { return &resetSpout{l: l, ticks: ticks} }).Output("id").Stream("tick", "what")
	b.Bolt("hold", func() Bolt { return &holder{} }).Input("s", Global()).InputStream("s", "tick", Global())
	cfg := testConfig()
	cfg.Clock = clock
	cfg.MessageTimeout = 100 * time.Millisecond
	cfg.ResetCap = 300 * time.Millisecond
	cfg.Retry.MaxAttempts = 1
	cfg.DeadLetter = l.deadLetter
	top := start(t, b, cfg)
	hold := func() *ComponentMetrics { m := top.Metrics(); return m.Component("hold") }
	outcomes := func() int { l.mu.Lock(); defer l.mu.Unlock(); return len(l.acked) + len(l.failed) }
	waitFor(t, 10*time.Second, "the tuple to be held", func() bool { return hold().Executed == 1 })
	// The acker applies a RESET at its own reading of the clock, taken once
	// per pass: with a clock moved by hand, up to one step old, or already
	// the next step's if the clock moves before the acker applies it. So
	// each step waits until the acker has applied its RESET before the
	// clock moves on. Resets every 40 ms set deadlines at least 60 ms
	// ahead of the reset, past the next one: the 100 ms timeout never
	// fires while they come. The last one, at 280 ms, extends the deadline
	// only to the cap, 300 ms.
	ackerResets := func() uint64 {
		if a := top.Metrics().Acker; a != nil {
			return a.Resets
		}
		return 0
	}
	for i := 1; i <= 7; i++ {
		clock.Set(time.Duration(i) * 40 * time.Millisecond)
		ticks <- "reset"
		waitFor(t, 10*time.Second, "the reset", func() bool { return hold().Resets == uint64(i) && ackerResets() == uint64(i) })
		if i < 7 && outcomes() != 0 { // the 7th may end it already (the cap, at a stale reading)
			t.Fatalf("the root ended by %v despite the resets", clock.Now())
		}
	}
	clock.Set(320 * time.Millisecond) // without the cap, the deadline would be 380 ms
	waitFor(t, 10*time.Second, "the timeout at the cap", func() bool { return outcomes() == 1 })
	ticks <- "reset"                                                                      // past the cap: refused
	ticks <- "ack"                                                                        // after the timeout: a late ack
	waitFor(t, 10*time.Second, "the late ack", func() bool { return hold().Acked == 10 }) // 9 ticks and the held tuple
	stop(t, top)
	l.check(t, 1, false)
	h := hold()
	if h.ResetsCapped != 1 || h.Resets != 7 || h.LateAcks != 1 {
		t.Errorf("resets %d, capped %d, late acks %d; want 7, 1, 1", h.Resets, h.ResetsCapped, h.LateAcks)
	}
	if f := l.failed[0][0]; f.Reason != ackcore.ReasonTimeout || f.Attempts != 1 || f.Latency < 240*time.Millisecond { // it outlived the 100 ms timeout
		t.Errorf("failure %+v", f)
	}
}

// clockBolt moves the fake clock d per input, as if each took d: the
// complete latency is then the queue in front of it, in inputs, times d.
type clockBolt struct {
	clock *ackcore.FakeClock
	d     time.Duration
}

func (c *clockBolt) Execute(t *Tuple, col *BoltCollector) {
	c.clock.Add(c.d)
	col.Ack(t)
}

func TestAdaptivePending(t *testing.T) {
	clock := &ackcore.FakeClock{}
	const n = 30000
	l, b, _ := idSource(n)
	b.Bolt("slow", func() Bolt { return &clockBolt{clock: clock, d: 100 * time.Microsecond} }).Input("ids", Shuffle())
	cfg := testConfig()
	cfg.Clock = clock
	cfg.MessageTimeout = time.Hour
	cfg.MaxSpoutPending = 1000 // fixed, the queue would be 100 ms long
	cfg.Adaptive = Adaptive{TargetP99: 10 * time.Millisecond, Min: 4, Interval: 100 * time.Millisecond}
	top := start(t, b, cfg)
	waitDone(t, top, 60*time.Second)
	stop(t, top)
	if s := l.check(t, n, false); s.completed != n {
		t.Fatalf("completed %d", s.completed)
	}
	sp := top.Metrics().Component("ids")
	p50 := time.Duration(sp.Latency.ValueAtQuantile(50)) * time.Microsecond
	t.Logf("bound at the end %d (from 1000), p50 %v p90 %v p99 %v", sp.Bound, p50,
		time.Duration(sp.Latency.ValueAtQuantile(90))*time.Microsecond, time.Duration(sp.Latency.ValueAtQuantile(99))*time.Microsecond)
	// The queue that holds p99 at 10 ms is 100 inputs long.
	if sp.Bound < 50 || sp.Bound > 150 {
		t.Errorf("bound %d, want about 100", sp.Bound)
	}
	if p50 > 15*time.Millisecond {
		t.Errorf("p50 %v, want near the 10 ms target", p50)
	}
}

// TestPort runs the topology on an acker opened by Config.Port (as the
// network acker's client would be), which also makes the spouts send
// explicit per-root timeouts.
func TestPort(t *testing.T) {
	const n = 2000
	var opened atomic.Int32
	l, b, ids := idSource(n)
	ids.Tasks(2)
	b.Bolt("fan", fanout(2)).Input("ids", Shuffle()).Output("id", "k")
	b.Bolt("sink", recordingSink(l)).Input("fan", Shuffle())
	cfg := testConfig()
	cfg.Port = func(s acker.Spec) (acker.Port, error) {
		opened.Add(1)
		a, err := acker.New(acker.Config{Shards: 2, Spec: acker.Spec{Producers: s.Producers, Tasks: s.Tasks, Receivers: s.Receivers, ReceiverOf: s.ReceiverOf}, Shard: ackcore.Config{MaxPending: 1 << 12, Timeout: time.Hour}})
		if err != nil {
			return nil, err
		}
		return a, a.Start()
	}
	top := start(t, b, cfg)
	waitDone(t, top, 30*time.Second)
	stop(t, top)
	if s := l.check(t, n, false); s.completed != n || opened.Load() != 1 {
		t.Errorf("completed %d, port opened %d times", s.completed, opened.Load())
	}
	m := top.Metrics()
	if m.Acker == nil || m.Acker.Completed != n || m.Acker.Inits != n {
		t.Errorf("acker stats %+v", m.Acker)
	}
	// A failing port fails Start with its error.
	cfg.Port = func(acker.Spec) (acker.Port, error) { return nil, errors.New("no route to acker") }
	b2 := NewBuilder()
	b2.Spout("s", func() Spout { return nopSpout{} }).Output("x")
	top2, err := b2.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := top2.Start(); err == nil || !strings.Contains(err.Error(), "no route to acker") {
		t.Errorf("Start with a failing port: %v", err)
	}
}

// failingOpen fails Open.
type failingOpen struct{ nopBolt }

func (failingOpen) Open(TaskContext) error { return fmt.Errorf("no database") }

func TestOpenError(t *testing.T) {
	b := NewBuilder()
	b.Spout("s", func() Spout { return nopSpout{} }).Output("x")
	b.Bolt("db", func() Bolt { return failingOpen{} }).Input("s", Shuffle())
	top, err := b.Build(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	err = top.Start()
	if err == nil || !strings.Contains(err.Error(), `bolt "db" task 1: Open: no database`) {
		t.Fatalf("Start: %v", err)
	}
}

// closeCounter is a spout that counts its Opens and Closes.
type closeCounter struct {
	nopSpout
	opens, closes *atomic.Int32
	closeErr      error
}

func (c closeCounter) Open(TaskContext) error { c.opens.Add(1); return nil }
func (c closeCounter) Close() error           { c.closes.Add(1); return c.closeErr }

// TestOpenErrorClosesOpened: when a later task's Open fails, every task
// opened before it is closed, once, and a Close error is reported too.
func TestOpenErrorClosesOpened(t *testing.T) {
	var opens, closes atomic.Int32
	b := NewBuilder()
	b.Spout("s", func() Spout { return closeCounter{opens: &opens, closes: &closes} }).Tasks(3).Output("x")
	b.Spout("t", func() Spout {
		return closeCounter{opens: &opens, closes: &closes, closeErr: errors.New("flush failed")}
	}).Output("y")
	b.Bolt("db", func() Bolt { return failingOpen{} }).Input("s", Shuffle()).Input("t", Shuffle())
	top, err := b.Build(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	err = top.Start()
	if err == nil || !strings.Contains(err.Error(), `Open: no database`) || !strings.Contains(err.Error(), `spout "t" task 3: Close: flush failed`) {
		t.Fatalf("Start: %v", err)
	}
	if opens.Load() != 4 || closes.Load() != 4 {
		t.Fatalf("%d opened, %d closed; want every opened task closed", opens.Load(), closes.Load())
	}
}

// TestParallelismDefault: the parallelism a user names runs in
// parallel: Tasks(4) alone is 4 executors, as in Storm; Executors sets
// fewer (or alone, as many tasks); neither is one of each.
func TestParallelismDefault(t *testing.T) {
	for _, tc := range []struct {
		tasks, executors         int
		wantTasks, wantExecutors int
	}{
		{0, 0, 1, 1},
		{4, 0, 4, 4},
		{4, 2, 4, 2},
		{0, 3, 3, 3},
		{4, 1, 4, 1},
	} {
		b := NewBuilder()
		b.Spout("ids", newIDSpout(newLedger(), 0)).Output("id")
		d := b.Bolt("sink", func() Bolt { return nopBolt{} }).Input("ids", Shuffle())
		if tc.tasks > 0 {
			d.Tasks(tc.tasks)
		}
		if tc.executors > 0 {
			d.Executors(tc.executors)
		}
		top, err := b.Build(testConfig())
		if err != nil {
			t.Fatal(err)
		}
		m := top.Metrics()
		if c := m.Component("sink"); c.Tasks != tc.wantTasks || c.Executors != tc.wantExecutors {
			t.Errorf("Tasks(%d) Executors(%d): %d tasks on %d executors, want %d on %d",
				tc.tasks, tc.executors, c.Tasks, c.Executors, tc.wantTasks, tc.wantExecutors)
		}
	}
}
