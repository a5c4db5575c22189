package acker_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/invariants"
	"github.com/xorack/xorack/internal/testkit"
)

// TestStuckReceiver: one receiver is never polled while the others are,
// through 10,000,000 messages (1,000,000 with -short). The heap grows by
// less than the configured bound for held outcomes (Footprint.Held), the
// stuck receiver's held outcomes stay within Backlog plus what its tasks
// had in flight, and its INITs are held back while the other tasks' roots
// flow. When it resumes, every outcome arrives exactly once.
func TestStuckReceiver(t *testing.T) {
	msgs := testkit.Size(10_000_000, 1_000_000)
	const (
		shards, producers, tasks = 2, 2, 4
		ringSize, backlog        = 1024, 1024
		maxPending               = 1 << 14
		samples                  = 32
	)
	roots := msgs / 2 // an INIT and the ACK that completes it
	a, err := acker.New(acker.Config{Shards: shards, Spec: acker.Spec{Producers: producers, Tasks: tasks}, RingSize: ringSize, OutcomeRingSize: 256, Backlog: backlog, Shard: ackcore.Config{MaxPending: maxPending}})
	if err != nil {
		t.Fatal(err)
	}
	bound := a.Footprint().Held
	// What one shard can hold for the stuck receiver: Backlog, one route
	// chunk (1024) over it, the roots its tasks had pending, and the INITs
	// staged before the producers saw the hold-back.
	perShard := backlog + 1024 + maxPending + producers*(ringSize+1)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	// Root i+1 is sent by producer i%2 for task (i/2)%4, or, when it
	// would go to the stuck receiver's task 0 and TrySend says no, for
	// task 1; stuck[i] says it went to task 0, got[i] counts its outcomes
	// (each root's receiver writes only its own roots). Every root is an
	// INIT and an ACK: msgs messages in all.
	stuck := make([]bool, roots)
	got := make([]uint8, roots)
	var bad atomic.Int64
	see := func(os []ackcore.Outcome) {
		for _, o := range os {
			if o.Kind != ackcore.Completed || o.Root == 0 || o.Root > uint64(roots) {
				bad.Add(1)
				continue
			}
			got[o.Root-1]++
		}
	}
	var polls sync.WaitGroup
	for r := 1; r < tasks; r++ {
		polls.Add(1)
		go func() {
			defer polls.Done()
			buf := make([]ackcore.Outcome, 0, 4096)
			for {
				var ok bool
				if buf, ok = a.Inbox(r).Wait(buf[:0]); !ok {
					return
				}
				see(buf)
			}
		}()
	}

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peakHeap uint64
	var peakHeld, heldBack int
	var prods sync.WaitGroup
	errs := make([]error, producers)
	for p := range producers {
		prods.Go(func() {
			pr := a.Sender(p)
			for i := p; i < roots; i += producers {
				task := uint32(i/2) % tasks
				root := uint64(i + 1)
				init := ackcore.Msg{Root: root, Kind: ackcore.Init, Task: task, Val: root}
				if task == 0 {
					// The stuck receiver's task: a held-back INIT goes to
					// task 1 instead (a spout emitting elsewhere).
					ok, err := pr.TrySend(init)
					if err != nil {
						errs[p] = err
						return
					}
					stuck[i] = ok
					init.Task = 1
					if !ok {
						task = 1
					}
				}
				if task != 0 {
					if errs[p] = pr.Send(init); errs[p] != nil {
						return
					}
				}
				if errs[p] = pr.Send(ackcore.Msg{Root: root, Kind: ackcore.Ack, Val: root}); errs[p] != nil {
					return
				}
				if p == 0 && i%(roots/samples) < producers {
					st := a.Inbox(0).(*acker.Receiver).Stats()
					peakHeld = max(peakHeld, st.Held)
					heldBack = max(heldBack, st.HeldBack)
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					peakHeap = max(peakHeap, ms.HeapAlloc)
				}
			}
			errs[p] = pr.Flush()
		})
	}
	if err := within(testWait, "the producers' sends", prods.Wait); err != nil {
		t.Fatal(err)
	}
	for p, err := range errs {
		if err != nil {
			t.Fatalf("producer %d: %v", p, err)
		}
	}
	runtime.ReadMemStats(&ms)
	peakHeap = max(peakHeap, ms.HeapAlloc)
	st := a.Inbox(0).(*acker.Receiver).Stats()
	peakHeld = max(peakHeld, st.Held)
	heldBack = max(heldBack, st.HeldBack)
	want0 := 0
	for _, s := range stuck {
		if s {
			want0++
		}
	}
	t.Logf("%d messages; stuck receiver: %d roots admitted of %d, held at most %d (bound %d per shard), held back by %d shards, %v since it took one; heap +%d bytes (bound %d)",
		msgs, want0, roots/tasks, peakHeld, perShard, heldBack, st.SinceTake, int64(peakHeap)-int64(base), bound)
	if grown := int64(peakHeap) - int64(base); grown > bound && !invariants.Enabled { // invariant checks build maps on every step
		t.Errorf("heap grew by %d bytes, over the held-outcome bound %d", grown, bound)
	}
	if peakHeld > shards*perShard {
		t.Errorf("stuck receiver: %d outcomes held, over %d", peakHeld, shards*perShard)
	}
	if heldBack == 0 || want0 >= roots/tasks {
		t.Errorf("stuck receiver never held back (%d shards; %d of %d roots admitted)", heldBack, want0, roots/tasks)
	}
	if st.Backlog < st.Held || st.Backlog == 0 || st.Taken != 0 {
		t.Errorf("stuck receiver stats %+v", st)
	}

	// Resume: every admitted root of task 0 arrives, once.
	buf := make([]ackcore.Outcome, 0, 4096)
	n0 := 0
	if err := await(testWait, "every admitted root of task 0 delivered",
		func() bool {
			buf = a.Inbox(0).Poll(buf[:0])
			see(buf)
			n0 += len(buf)
			return n0 >= want0
		},
		func() string { return fmt.Sprintf("%d of %d outcomes taken", n0, want0) }); err != nil {
		t.Fatal(err)
	}
	final := a.Stop()
	if err := within(testWait, "receiver 0 drained after Stop", func() {
		for {
			var ok bool
			if buf, ok = a.Inbox(0).Wait(buf[:0]); !ok {
				return
			}
			see(buf)
			n0 += len(buf)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := within(testWait, "receivers 1-3 drained after Stop", polls.Wait); err != nil {
		t.Fatal(err)
	}
	if n0 != want0 || bad.Load() != 0 {
		t.Fatalf("stuck receiver got %d outcomes after resuming, want %d; %d malformed", n0, want0, bad.Load())
	}
	for i := range roots {
		if got[i] != 1 {
			t.Fatalf("root %d (to the stuck receiver: %v): %d outcomes", i+1, stuck[i], got[i])
		}
	}
	if final.Completed != uint64(roots) || final.Pending != 0 {
		t.Fatalf("stats %+v, want %d completed", final, roots)
	}
	if st := a.Inbox(0).(*acker.Receiver).Stats(); st.Taken != uint64(want0) || st.Backlog != 0 || st.HeldBack != 0 {
		t.Fatalf("receiver 0 after resuming: %+v, want %d taken", st, want0)
	}
}

// TestHeldBackSend: with a receiver not polled, its tasks' INITs are held
// back once a shard holds Backlog outcomes for it: Send waits, TrySend
// says no, ACKs and other tasks' INITs still flow. Polling it releases the
// waiting Send, and every outcome arrives once.
func TestHeldBackSend(t *testing.T) {
	const roots = 2000
	a := started(t, acker.Config{Spec: acker.Spec{Producers: 2, Tasks: 2}, RingSize: 64, OutcomeRingSize: 16, Backlog: 32,
		Shard: ackcore.Config{MaxPending: 4096}})
	// Receiver 1 is polled all along.
	var got1 atomic.Int64
	done1 := make(chan struct{})
	go func() {
		defer close(done1)
		a.Inbox(1).(*acker.Receiver).Run(func(ackcore.Outcome) { got1.Add(1) })
	}()
	sendErr := make(chan error, 1)
	go func() {
		p := a.Sender(0)
		for r := uint64(1); r <= roots; r++ {
			if err := p.Send(ackcore.Msg{Root: r, Kind: ackcore.Init, Task: 0, Val: r}); err != nil {
				sendErr <- err
				return
			}
			if err := p.Send(ackcore.Msg{Root: r, Kind: ackcore.Ack, Val: r}); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- p.Flush()
	}()
	if err := await(testWait, "receiver 0 held back",
		func() bool {
			select {
			case err := <-sendErr:
				t.Fatalf("all %d roots sent (%v) without a hold-back", roots, err)
			default:
			}
			return a.Inbox(0).(*acker.Receiver).Stats().HeldBack != 0
		},
		func() string { return fmt.Sprintf("receiver 0's stats %+v", a.Inbox(0).(*acker.Receiver).Stats()) }); err != nil {
		t.Fatal(err)
	}
	// Held back, and nobody polls receiver 0: the hold lasts.
	p1 := a.Sender(1)
	if ok, err := p1.TrySend(ackcore.Msg{Root: roots + 1, Kind: ackcore.Init, Task: 0, Val: 1}); ok || err != nil {
		t.Fatalf("TrySend of a held-back INIT: %v, %v", ok, err)
	}
	const others = 100
	for r := uint64(roots + 2); r < roots+2+others; r++ {
		if err := p1.Send(ackcore.Msg{Root: r, Kind: ackcore.Init, Task: 1, Val: r}); err != nil {
			t.Fatal(err)
		}
		if err := p1.Send(ackcore.Msg{Root: r, Kind: ackcore.Ack, Val: r}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p1.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := await(testWait, "task 1's outcomes while task 0 is held back",
		func() bool { return got1.Load() >= others },
		func() string { return fmt.Sprintf("task 1 got %d of %d", got1.Load(), others) }); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-sendErr:
		t.Fatalf("the held-back Send returned (%v)", err)
	default:
	}
	// Resume receiver 0: the Send finishes, each root completes once.
	seen := map[uint64]int{}
	done0 := make(chan struct{})
	go func() {
		defer close(done0)
		a.Inbox(0).(*acker.Receiver).Run(func(o ackcore.Outcome) { seen[o.Root]++ })
	}()
	select {
	case err := <-sendErr:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testWait):
		t.Fatal("Send still held back after receiver 0 resumed")
	}
	st := a.Stop()
	if err := within(testWait, "receivers 0 and 1 returning after Stop", func() { <-done0; <-done1 }); err != nil {
		t.Fatal(err)
	}
	for r := uint64(1); r <= roots; r++ {
		if seen[r] != 1 {
			t.Fatalf("root %d: %d outcomes", r, seen[r])
		}
	}
	if len(seen) != roots || st.Completed != roots+others {
		t.Fatalf("%d roots seen, stats %+v", len(seen), st)
	}
}

// TestSpoutPollsWhileHeldBack: a goroutine that sends its own task's INITs
// and polls that task's receiver (a spout executor) must not wait in Send:
// with TrySend and a Poll while it says no, it never deadlocks, however
// small Backlog is.
func TestSpoutPollsWhileHeldBack(t *testing.T) {
	roots := testkit.Size(200_000, 20_000)
	a := started(t, acker.Config{Shards: 2, Spec: acker.Spec{Producers: 1, Tasks: 1}, RingSize: 64, OutcomeRingSize: 16, Backlog: 8,
		Shard: ackcore.Config{MaxPending: 1 << 16}})
	type result struct {
		seen    []uint8
		refused int
		err     error
	}
	res := make(chan result, 1)
	const wait = testWait
	go func() {
		p, in := a.Sender(0), a.Inbox(0)
		seen := make([]uint8, roots+1)
		var buf []ackcore.Outcome
		refused, taken := 0, 0
		poll := func() int {
			buf = in.Poll(buf[:0])
			for _, o := range buf {
				seen[o.Root]++
			}
			taken += len(buf)
			return len(buf)
		}
		for r := uint64(1); r <= uint64(roots); r++ {
			var sendErr error
			// Refused while held back: flush and poll (what releases the
			// hold), and try again.
			admitted := func() bool {
				ok, err := p.TrySend(ackcore.Msg{Root: r, Kind: ackcore.Init, Val: r})
				if ok || err != nil {
					sendErr = err
					return true
				}
				refused++
				p.Flush()
				poll()
				return false
			}
			if err := await(wait, "INIT admitted", admitted, func() string {
				return fmt.Sprintf("root %d refused; %d outcomes taken", r, taken)
			}); err != nil {
				res <- result{err: err}
				return
			}
			if sendErr != nil {
				res <- result{err: sendErr}
				return
			}
			if err := p.Send(ackcore.Msg{Root: r, Kind: ackcore.Ack, Val: r}); err != nil {
				res <- result{err: err}
				return
			}
			poll()
		}
		p.Flush()
		if err := await(wait, "an outcome for every root", func() bool { poll(); return taken >= roots }, func() string {
			return fmt.Sprintf("%d of %d outcomes taken", taken, roots)
		}); err != nil {
			res <- result{err: err}
			return
		}
		res <- result{seen: seen, refused: refused}
	}()
	var r result
	select {
	case r = <-res:
	case <-time.After(2 * wait):
		t.Fatal("the polling spout is stuck")
	}
	st := a.Stop()
	if r.err != nil {
		t.Fatal(r.err)
	}
	for root := 1; root <= roots; root++ {
		if r.seen[root] != 1 {
			t.Fatalf("root %d: %d outcomes", root, r.seen[root])
		}
	}
	if st.Completed != uint64(roots) {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("%d roots, %d TrySends refused", roots, r.refused)
}

// TestStopReleasesHeldSend: a Send waiting for a held-back receiver
// returns ErrClosed when the acker stops, and Stop delivers what was held.
func TestStopReleasesHeldSend(t *testing.T) {
	a := started(t, acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 1}, OutcomeRingSize: 16, Backlog: 16,
		Shard: ackcore.Config{MaxPending: 4096}})
	sendErr := make(chan error, 1)
	go func() {
		p := a.Sender(0)
		for r := uint64(1); ; r++ {
			if err := p.Send(ackcore.Msg{Root: r, Kind: ackcore.Init}); err != nil {
				sendErr <- err
				return
			}
		}
	}()
	if err := await(testWait, "receiver 0 held back",
		func() bool {
			select {
			case err := <-sendErr:
				t.Fatalf("Send returned %v before any hold-back", err)
			default:
			}
			return a.Inbox(0).(*acker.Receiver).Stats().HeldBack != 0
		},
		func() string { return fmt.Sprintf("receiver 0's stats %+v", a.Inbox(0).(*acker.Receiver).Stats()) }); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan ackcore.Stats, 1)
	go func() { stopped <- a.Stop() }()
	select {
	case err := <-sendErr:
		if !errors.Is(err, acker.ErrClosed) {
			t.Fatalf("held Send returned %v, want ErrClosed", err)
		}
	case <-time.After(testWait):
		t.Fatal("held Send still waiting after Stop")
	}
	n := 0
	var st ackcore.Stats
	if err := within(testWait, "receiver 0's Run and Stop returning", func() {
		a.Inbox(0).(*acker.Receiver).Run(func(ackcore.Outcome) { n++ })
		st = <-stopped
	}); err != nil {
		t.Fatal(err)
	}
	if uint64(n) != st.Completed || n == 0 {
		t.Fatalf("%d outcomes delivered, stats %+v", n, st)
	}
}
