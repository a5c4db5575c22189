package acker_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/acktest/model"
	"github.com/xorack/xorack/internal/acktest/treegen"
	"github.com/xorack/xorack/internal/testkit"
)

// expected runs each root's delivered messages through a fresh model and
// lets every deadline pass: the one outcome the root must get, whatever
// order its messages arrive in (the streams have no duplicates, so order
// does not change outcomes).
func expected(evs []treegen.Event, timeout time.Duration) map[uint64]ackcore.Outcome {
	byRoot := map[uint64][]treegen.Event{}
	for _, e := range evs {
		byRoot[e.Msg.Root] = append(byRoot[e.Msg.Root], e)
	}
	want := map[uint64]ackcore.Outcome{}
	for r, es := range byRoot {
		m := model.New(1<<20, timeout, time.Millisecond)
		for _, e := range es {
			if o, ok := m.Apply(0, e.Msg, e.IDs); ok {
				want[r] = o
			}
		}
		for _, o := range m.Expire(time.Hour) {
			want[r] = o
		}
	}
	return want
}

func TestShardedEndToEnd(t *testing.T) {
	roots := testkit.Size(3000, 800)
	for _, shards := range []int{1, 2, 4} {
		for _, drop := range []float64{0, 0.01} {
			t.Run(fmt.Sprintf("shards=%d/drop=%v", shards, drop), func(t *testing.T) {
				runSharded(t, shards, 3, 0, nil, roots, drop, uint64(shards)*7+uint64(drop*1000))
			})
		}
	}
	// Tasks grouped onto fewer receivers, by ReceiverOf and by the default
	// mapping (task mod Receivers): each receiver gets exactly its tasks'
	// outcomes.
	for _, c := range []struct {
		shards, receivers int
		custom            bool
	}{{1, 1, true}, {2, 2, true}, {4, 3, true}, {2, 2, false}, {1, 3, false}} {
		t.Run(fmt.Sprintf("shards=%d/receivers=%d/custom=%v", c.shards, c.receivers, c.custom), func(t *testing.T) {
			var of func(int) int
			if c.custom {
				of = receiverOf(c.receivers)
			}
			runSharded(t, c.shards, 3, c.receivers, of, roots, 0.01, uint64(c.shards*13+c.receivers))
		})
	}
}

// receiverOf is a task -> receiver mapping unlike the default: for 5
// tasks it uses every receiver of 1, 2 or 3 and differs from task mod
// receivers.
func receiverOf(receivers int) func(int) int {
	return func(task int) int { return (task*5 + 1) % receivers }
}

// runSharded runs random trees through a Sharded acker and checks every
// root's outcome against the model. receivers 0 means one per task;
// recvOf nil the default mapping.
func runSharded(t *testing.T, shards, producers, receivers int, recvOf func(int) int, roots int, drop float64, seed uint64) {
	const tasks = 5
	const timeout = 200 * time.Millisecond
	rng := rand.New(rand.NewPCG(seed, 99))
	gen := treegen.Options{Roots: roots, MaxFanout: 3, MaxDepth: 3, JoinProb: 0.2, FailProb: 0.02, Tasks: tasks}
	evs, _ := treegen.Generate(rng, gen)
	evs, _ = treegen.Faults(rng, evs, 0, 0, drop)
	want := expected(evs, timeout)

	// The shards read a fake clock, frozen while messages flow, so no root
	// times out however slowly this runs (-race); then it jumps past every
	// deadline and only the roots the model says time out must. Each
	// shard's bound has room for every root pending at once, and for the
	// orphans of the failed ones' later ACKs, and no more: the invariant
	// build checks the whole table at every step (at 65,536 the test took
	// a minute there).
	clock := &ackcore.FakeClock{}
	cfg := acker.Config{
		Shards: shards, Spec: acker.Spec{Producers: producers, Tasks: tasks}, RingSize: 64, OutcomeRingSize: 16, Batch: 32,
		Shard: ackcore.Config{MaxPending: 2 * roots, Timeout: timeout, Clock: clock},
	}
	if receivers == 0 {
		receivers = tasks
	}
	cfg.Receivers, cfg.ReceiverOf = receivers, recvOf
	if recvOf == nil {
		recvOf = func(task int) int { return task % receivers }
	}
	a := started(t, cfg)
	// Spread messages over producers at random (a root's messages travel
	// through different producers, so they arrive in any order).
	per := make([][]ackcore.Msg, producers)
	for _, e := range evs {
		p := rng.IntN(producers)
		per[p] = append(per[p], e.Msg)
	}
	var got sync.Map // root -> Outcome
	var dups sync.Map
	total := len(want)
	collected := make(chan struct{}, total)
	var spouts sync.WaitGroup
	for task := 0; task < tasks; task++ {
		if a.ReceiverOf(task) != recvOf(task) || a.Inbox(a.ReceiverOf(task)) != a.Inbox(recvOf(task)) {
			t.Fatalf("task %d: ReceiverOf %d, Spout is Receiver(%d): %v; want receiver %d",
				task, a.ReceiverOf(task), recvOf(task), a.Inbox(a.ReceiverOf(task)) == a.Inbox(recvOf(task)), recvOf(task))
		}
	}
	for r := 0; r < receivers; r++ {
		sp := a.Inbox(r).(*acker.Receiver)
		spouts.Go(func() {
			sp.Run(func(o ackcore.Outcome) {
				if recvOf(int(o.Task)) != r {
					t.Errorf("receiver %d got an outcome for task %d, whose receiver is %d", r, o.Task, recvOf(int(o.Task)))
				}
				if _, loaded := got.LoadOrStore(o.Root, o); loaded {
					dups.Store(o.Root, o)
				}
				collected <- struct{}{}
			})
		})
	}
	var prods sync.WaitGroup
	for p := 0; p < producers; p++ {
		pr := a.Sender(p)
		prods.Go(func() {
			for i, m := range per[p] {
				if err := pr.Send(m); err != nil {
					t.Errorf("send: %v", err)
					return
				}
				if i%50 == 0 {
					pr.Flush()
				}
			}
			pr.Flush()
		})
	}
	if err := within(testWait, "the producers' sends", prods.Wait); err != nil {
		t.Fatal(err)
	}
	// Wait until the shards have applied every message (their published
	// counters say so at their next tick), then let time pass. A hang
	// fails, it does not pass.
	if err := await(testWait, "every message applied",
		func() bool {
			st := a.Stats()
			return st.Inits+st.Acks+st.Fails+st.Resets == uint64(len(evs))
		},
		func() string { return fmt.Sprintf("shards applied %+v of %d messages", a.Stats(), len(evs)) }); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(testWait)
	clock.Add(timeout + 2*time.Millisecond)
	for i := 0; i < total; i++ {
		select {
		case <-collected:
		case <-deadline:
			t.Fatalf("only %d of %d outcomes arrived", i, total)
		}
	}
	st := a.Stop()
	if err := within(testWait, "the receivers' Run returning after Stop", spouts.Wait); err != nil {
		t.Fatal(err)
	}
	dups.Range(func(k, v any) bool {
		t.Errorf("root %#x got a second outcome %+v", k, v)
		return true
	})
	n := 0
	got.Range(func(k, v any) bool {
		n++
		r, o := k.(uint64), v.(ackcore.Outcome)
		w, ok := want[r]
		if !ok {
			t.Errorf("root %#x: unexpected outcome %+v", r, o)
		} else if o.Kind != w.Kind || o.Reason != w.Reason || o.Task != w.Task {
			t.Errorf("root %#x: outcome %v/%v task %d, model %v/%v task %d", r, o.Kind, o.Reason, o.Task, w.Kind, w.Reason, w.Task)
		}
		return true
	})
	if n != total {
		t.Fatalf("%d outcomes, want %d", n, total)
	}
	if st.Completed+st.Failed() != uint64(total) || st.FailedStopped != 0 {
		t.Fatalf("stats %+v for %d roots", st, total)
	}
}

// TestShardedStopReportsPending: roots still pending at Stop come back
// Failed{stopped}, and sends after Stop fail with ErrClosed.
func TestShardedStopReportsPending(t *testing.T) {
	a := started(t, acker.Config{Shards: 2, Spec: acker.Spec{Producers: 1, Tasks: 1}, Shard: ackcore.Config{MaxPending: 100}})
	p := a.Sender(0)
	for r := uint64(1); r <= 10; r++ {
		if err := p.Send(ackcore.Msg{Root: r, Kind: ackcore.Init, Val: r}); err != nil {
			t.Fatal(err)
		}
	}
	p.Flush()
	var outs []ackcore.Outcome
	done := make(chan struct{})
	go func() {
		a.Inbox(a.ReceiverOf(0)).(*acker.Receiver).Run(func(o ackcore.Outcome) { outs = append(outs, o) })
		close(done)
	}()
	st := a.Stop()
	receiveWithin(t, done, "the receiver's Run returning after Stop")
	if len(outs) != 10 || st.FailedStopped != 10 {
		t.Fatalf("%d outcomes, stats %+v", len(outs), st)
	}
	for _, o := range outs {
		if o.Kind != ackcore.Failed || o.Reason != ackcore.ReasonStopped {
			t.Fatalf("outcome %+v", o)
		}
	}
	if err := p.Send(ackcore.Msg{Root: 99, Kind: ackcore.Ack, Val: 1}); err != acker.ErrClosed {
		t.Fatalf("send after stop: %v", err)
	}
}

// TestShardedOversubscribed: Plan's note says when executors and producers
// outnumber GOMAXPROCS, and only then.
func TestShardedOversubscribed(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	for _, c := range []struct {
		shards, producers int
		warn              bool
	}{{1, 1, false}, {1, 2, true}, {2, 1, true}} {
		a := started(t, acker.Config{Shards: c.shards, Spec: acker.Spec{Producers: c.producers, Tasks: 1}, Shard: ackcore.Config{MaxPending: 10}})
		note := a.Plan().Note
		a.Stop()
		want := fmt.Sprintf("%d executors and %d producers exceed GOMAXPROCS 2", c.shards, c.producers)
		if strings.Contains(note, want) != c.warn {
			t.Errorf("%d shards, %d producers: note %q; want the warning: %v", c.shards, c.producers, note, c.warn)
		}
	}
}

func TestShardedConfigErrors(t *testing.T) {
	for _, c := range []acker.Config{
		{Spec: acker.Spec{Producers: 1, Tasks: 1}, Shards: -1, Shard: ackcore.Config{MaxPending: 1}},
		{Spec: acker.Spec{Producers: 0, Tasks: 1}, Shard: ackcore.Config{MaxPending: 1}},
		{Spec: acker.Spec{Producers: 1, Tasks: 0}, Shard: ackcore.Config{MaxPending: 1}},
		{Spec: acker.Spec{Producers: 1, Tasks: 1}, RingSize: 1000, Shard: ackcore.Config{MaxPending: 1}},
		{Spec: acker.Spec{Producers: 1, Tasks: 1}, Shard: ackcore.Config{MaxPending: 0}},
		{Spec: acker.Spec{Producers: 1, Tasks: 2, Receivers: 3}, Shard: ackcore.Config{MaxPending: 1}},
		{Spec: acker.Spec{Producers: 1, Tasks: 2, Receivers: -1}, Shard: ackcore.Config{MaxPending: 1}},
	} {
		if _, err := acker.New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	_, err := acker.New(acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 4, Receivers: 2, ReceiverOf: func(t int) int { return t - 1 }}, Shard: ackcore.Config{MaxPending: 1}})
	if err == nil || !strings.Contains(err.Error(), "ReceiverOf(0) = -1") {
		t.Errorf("ReceiverOf out of range: %v", err)
	}
	a, _ := acker.New(acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 2}, Shard: ackcore.Config{MaxPending: 1}})
	if err := a.Sender(0).Send(ackcore.Msg{Root: 1, Kind: ackcore.Init, Task: 2, Val: 1}); err == nil {
		t.Error("INIT for task 2 of 2 accepted")
	}
}

// TestShardedSendBatch: a batch naming a task out of range stages nothing
// and says which message; a batch larger than the rings (so the producer
// waits for room) delivers every message, through one shard and two.
func TestShardedSendBatch(t *testing.T) {
	for _, shards := range []int{1, 2} {
		a := started(t, acker.Config{Shards: shards, Spec: acker.Spec{Producers: 1, Tasks: 2}, RingSize: 64, Shard: ackcore.Config{MaxPending: 1000}})
		outs := make([][]ackcore.Outcome, 2)
		var wg sync.WaitGroup
		for task := range 2 {
			wg.Go(func() {
				a.Inbox(a.ReceiverOf(task)).(*acker.Receiver).Run(func(o ackcore.Outcome) { outs[task] = append(outs[task], o) })
			})
		}
		p := a.Sender(0)
		bad := []ackcore.Msg{{Root: 1, Kind: ackcore.Init, Task: 0, Val: 1}, {Root: 2, Kind: ackcore.Init, Task: 2, Val: 1}}
		if err := p.SendBatch(bad); err == nil || !strings.Contains(err.Error(), "message 1") || !strings.Contains(err.Error(), "task 2") {
			t.Fatalf("shards=%d: bad batch: %v", shards, err)
		}
		const roots = 500
		var msgs []ackcore.Msg
		for r := uint64(10); r < 10+roots; r++ {
			msgs = append(msgs, ackcore.Msg{Root: r, Kind: ackcore.Init, Task: uint32(r % 2), Val: r}, ackcore.Msg{Root: r, Kind: ackcore.Ack, Val: r})
		}
		if err := p.SendBatch(msgs); err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
		st := a.Stop()
		if err := within(testWait, "the receivers' Run returning after Stop", wg.Wait); err != nil {
			t.Fatal(err)
		}
		if st.Inits != roots || st.Completed != roots || len(outs[0])+len(outs[1]) != roots {
			t.Fatalf("shards=%d: stats %+v, %d+%d outcomes for %d roots", shards, st, len(outs[0]), len(outs[1]), roots)
		}
		for task, os := range outs {
			for _, o := range os {
				if o.Kind != ackcore.Completed || o.Task != uint32(task) || o.Root%2 != uint64(task) {
					t.Fatalf("shards=%d: spout %d got %+v", shards, task, o)
				}
			}
		}
	}
}

// TestReceiverOfCalledOnce checks Spec.ReceiverOf's documented contract:
// New calls it once per task, and the acker routes by those answers. A
// ReceiverOf that hands out receivers as it is asked (recording each
// task's) must see each task once, or the acker's table and the caller's
// record disagree and outcomes go to an inbox the caller does not poll
// for that task.
func TestReceiverOfCalledOnce(t *testing.T) {
	const tasks, receivers = 3, 2
	calls := make([]int, tasks)
	recorded := make([]int, tasks)
	next := 0
	a, err := acker.New(acker.Config{Spec: acker.Spec{Producers: 1, Tasks: tasks, Receivers: receivers,
		ReceiverOf: func(task int) int {
			calls[task]++
			r := next % receivers
			next++
			if calls[task] == 1 {
				recorded[task] = r
			}
			return r
		}}, Shard: ackcore.Config{MaxPending: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for task := range tasks {
		if calls[task] != 1 || a.ReceiverOf(task) != recorded[task] {
			t.Errorf("task %d: ReceiverOf called %d times, acker routes to receiver %d, the caller recorded %d",
				task, calls[task], a.ReceiverOf(task), recorded[task])
		}
	}
}
