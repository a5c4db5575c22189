package acker_test

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/invariants"
	"github.com/xorack/xorack/internal/testkit"
)

// startWith builds and starts an acker with one receiver and roots
// 1..n already reported Completed and waiting in its ring (INITs with val
// 0 complete at once).
func startWith(t *testing.T, n int) *acker.Acker {
	t.Helper()
	a := started(t, acker.Config{Shards: 2, Spec: acker.Spec{Producers: 1, Tasks: 1}, Shard: ackcore.Config{MaxPending: 1024}})
	p := a.Sender(0)
	for r := uint64(1); r <= uint64(n); r++ {
		if err := p.Send(ackcore.Msg{Root: r, Kind: ackcore.Init}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	rc := a.Inbox(0).(*acker.Receiver)
	if err := await(testWait, "an outcome for every root in receiver 0's backlog",
		func() bool { return rc.Stats().Backlog >= n },
		func() string { return fmt.Sprintf("%d of %d outcomes in receiver 0's backlog", rc.Stats().Backlog, n) }); err != nil {
		t.Fatal(err)
	}
	return a
}

// runPanicking runs fn on rc until it panics, and returns the panic.
func runPanicking(rc *acker.Receiver, fn func(ackcore.Outcome)) (p any) {
	defer func() { p = recover() }()
	rc.Run(fn)
	return nil
}

// TestRunPanicExactlyOnce: a Run callback panics at the 10th of 100
// outcomes; after recovering, Run, Poll, Wait or WaitUntil delivers the
// rest. Every outcome arrives exactly once: the panicking one counts as
// delivered, the rest of its batch is not delivered twice.
func TestRunPanicExactlyOnce(t *testing.T) {
	const n = 100
	for _, resume := range []string{"Run", "Poll", "Wait", "WaitUntil"} {
		t.Run("then="+resume, func(t *testing.T) {
			a := startWith(t, n)
			rc := a.Inbox(0).(*acker.Receiver)
			seen := map[uint64]int{}
			calls := 0
			p := runPanicking(rc, func(o ackcore.Outcome) {
				seen[o.Root]++
				if calls++; calls == 10 {
					panic("callback failed")
				}
			})
			if p != "callback failed" || len(seen) != 10 {
				t.Fatalf("panic %v after %d outcomes", p, len(seen))
			}
			stopped := make(chan ackcore.Stats, 1)
			stop := func() { stopped <- a.Stop() }
			var st ackcore.Stats
			none := false // Wait or WaitUntil found no outcome after the panic
			if err := within(testWait, "the rest taken with "+resume+" and Stop returning", func() {
				var buf []ackcore.Outcome
				switch resume {
				case "Run":
					go stop()
					rc.Run(func(o ackcore.Outcome) { seen[o.Root]++ })
				case "Poll":
					buf = rc.Poll(buf)
					go stop()
				case "Wait", "WaitUntil":
					var ok bool
					if resume == "Wait" {
						buf, ok = rc.Wait(buf)
					} else {
						buf, ok = rc.WaitUntil(buf, time.After(testWait))
					}
					if none = !ok; none {
						return
					}
					go stop()
				}
				for {
					for _, o := range buf {
						seen[o.Root]++
					}
					var ok bool
					if buf, ok = rc.Wait(buf[:0]); !ok {
						break
					}
				}
				st = <-stopped
			}); err != nil {
				t.Fatal(err)
			}
			if none {
				t.Fatal("no outcome after the panic")
			}
			for r := uint64(1); r <= n; r++ {
				if seen[r] != 1 {
					t.Fatalf("root %d delivered %d times", r, seen[r])
				}
			}
			if len(seen) != n || st.Completed != n {
				t.Fatalf("%d roots seen, stats %+v", len(seen), st)
			}
			if got := a.Inbox(0).(*acker.Receiver).Stats().Taken; got != n {
				t.Fatalf("receiver took %d, want %d", got, n)
			}
		})
	}
}

// TestConfigBytes: sizes and counts that would not fit are refused before
// anything is allocated, with an error naming the value and the bytes.
func TestConfigBytes(t *testing.T) {
	sh := ackcore.Config{MaxPending: 1024}
	type refusal struct {
		cfg  acker.Config
		want []string
	}
	cases := []refusal{
		{acker.Config{Spec: acker.Spec{Producers: 4096, Tasks: 1}, Shards: 1024, Shard: sh}, []string{"1024 shards", "4096 producers", "bytes", "MaxBytes"}},
		{acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 1}, Shards: 64, Shard: ackcore.Config{MaxPending: 1 << 27}}, []string{"MaxPending 134217728", "bytes", "MaxBytes"}},
		{acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 1}, Shard: sh, MaxBytes: 1 << 19}, []string{"MaxBytes 524288"}},
		{acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 1}, Shard: sh, Batch: 8192}, []string{"Batch 8192"}},
		{acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 1}, Shard: ackcore.Config{MaxPending: -1}}, []string{"MaxPending -1"}},
	}
	if strconv.IntSize == 64 {
		// Sizes past a 32-bit int, shifted at run time so that the file
		// compiles for 386 (where these cases cannot be written).
		wide := func(shift uint) int { return 1 << shift }
		cases = append(cases,
			refusal{acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 1}, Shard: sh, RingSize: wide(40)}, []string{"RingSize 1099511627776", "bytes"}},
			refusal{acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 1}, Shard: sh, OutcomeRingSize: wide(62)}, []string{"OutcomeRingSize 4611686018427387904", "bytes"}},
			refusal{acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 1}, Shard: sh, Backlog: wide(40)}, []string{"Backlog 1099511627776", "bytes"}})
	}
	for _, c := range cases {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		a, err := acker.New(c.cfg)
		runtime.ReadMemStats(&after)
		if err == nil {
			a.Stop()
			t.Errorf("New(%+v) accepted", c.cfg)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("New: %v; want it to name %q", err, w)
			}
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
			t.Errorf("New allocated %d bytes before refusing: %v", alloc, err)
		}
	}
	// At the bound: a budget that fits is accepted, and Footprint says
	// what New checked.
	cfg := acker.Config{Spec: acker.Spec{Producers: 2, Tasks: 2}, Shards: 2, Shard: sh}
	a, err := acker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := a.Footprint()
	owned := sh
	owned.Owners = 2 // the producers own their orphans, and each shard's executor publishes their refusals (8 bytes each)
	if f.Rings != 2*2*(4096*32+320) || f.OutcomeRings != 2*2*(4096*32+320) || f.Tables != 2*(owned.Bytes()+8*2) || f.Held <= 0 {
		t.Fatalf("footprint %+v", f)
	}
	a.Stop()
	cfg.MaxBytes = f.Total()
	if a, err := acker.New(cfg); err != nil {
		t.Fatalf("MaxBytes = Footprint().Total(): %v", err)
	} else {
		a.Stop()
	}
	cfg.MaxBytes--
	if _, err := acker.New(cfg); err == nil || !strings.Contains(err.Error(), fmt.Sprint(f.Total())) {
		t.Fatalf("MaxBytes one under the footprint: %v", err)
	}
}

// TestHandleRange: an index out of range is a programmer error: it panics
// with a message naming the index and the range.
func TestHandleRange(t *testing.T) {
	a, err := acker.New(acker.Config{Spec: acker.Spec{Producers: 2, Tasks: 3, Receivers: 2}, Shard: ackcore.Config{MaxPending: 16}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	for _, c := range []struct {
		call func()
		want string
	}{
		{func() { a.Sender(2) }, "Sender(2) out of range [0, 2)"},
		{func() { a.Sender(-1) }, "Sender(-1) out of range [0, 2)"},
		{func() { a.Sender(5) }, "Sender(5) out of range [0, 2)"},
		{func() { a.Inbox(2) }, "Inbox(2) out of range [0, 2)"},
		{func() { a.Inbox(-3) }, "Inbox(-3) out of range [0, 2)"},
		{func() { a.Inbox(7).(*acker.Receiver).Stats() }, "Inbox(7) out of range [0, 2)"},
		{func() { a.Inbox(a.ReceiverOf(3)) }, "task 3 out of range [0, 3)"},
		{func() { a.ReceiverOf(-1) }, "task -1 out of range [0, 3)"},
	} {
		func() {
			defer func() {
				if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), c.want) {
					t.Errorf("panic %v, want %q", p, c.want)
				}
			}()
			c.call()
		}()
	}
}

// TestPlanAnyTime: Plan is safe from any goroutine before, during and
// after Start and Stop (the race detector checks), and names an
// oversubscribing configuration from New on.
func TestPlanAnyTime(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	a, err := acker.New(acker.Config{Shards: 2, Spec: acker.Spec{Producers: 2, Tasks: 1}, Pin: true, Shard: ackcore.Config{MaxPending: 16}})
	if err != nil {
		t.Fatal(err)
	}
	if note := a.Plan().Note; !strings.Contains(note, "oversubscribed: 2 executors and 2 producers exceed GOMAXPROCS 2") {
		t.Fatalf("Plan before Start: %q", note)
	}
	var wg sync.WaitGroup
	quit := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-quit:
					return
				default:
				}
				p := a.Plan()
				if len(p.CPUs) > 0 {
					p.CPUs[0] = -7 // a copy: scribbling on it changes nothing
				}
				runtime.Gosched()
			}
		})
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	a.Stop()
	close(quit)
	if err := within(testWait, "the goroutines calling Plan returning", wg.Wait); err != nil {
		t.Fatal(err)
	}
	for _, c := range a.Plan().CPUs {
		if c == -7 {
			t.Fatal("Plan returned its own CPUs slice")
		}
	}
	if err := a.Start(); err == nil {
		t.Fatal("Start after Stop accepted")
	}
}

// TestOldestPending: the oldest pending roots across shards, oldest
// first, before Start, while running (answered by the executors) and after
// Stop.
func TestOldestPending(t *testing.T) {
	clock := &ackcore.FakeClock{}
	a, err := acker.New(acker.Config{Shards: 3, Spec: acker.Spec{Producers: 1, Tasks: 1}, Shard: ackcore.Config{MaxPending: 1024, Timeout: time.Hour, Clock: clock}})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.OldestPending(5); len(got) != 0 {
		t.Fatalf("before Start: %v", got)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	p := a.Sender(0)
	const roots = 12
	for r := uint64(1); r <= roots; r++ {
		if err := p.Send(ackcore.Msg{Root: r, Kind: ackcore.Init, Val: 1}); err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
		// Each root's INIT is applied before the clock moves on.
		if err := await(testWait, "each INIT applied before the clock moves on",
			func() bool { return a.Stats().Inits >= r },
			func() string { return fmt.Sprintf("INIT %d not applied (stats %+v)", r, a.Stats()) }); err != nil {
			t.Fatal(err)
		}
		clock.Add(10 * time.Millisecond)
	}
	check := func(when string) {
		got := a.OldestPending(5)
		if len(got) != 5 {
			t.Fatalf("%s: %d roots, want 5", when, len(got))
		}
		for i, pr := range got {
			if pr.Root != uint64(i+1) {
				t.Fatalf("%s: %d-th oldest is root %d (%v), want %d", when, i, pr.Root, got, i+1)
			}
		}
	}
	check("running")
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Inbox(0).(*acker.Receiver).Run(func(ackcore.Outcome) {})
	}()
	st := a.Stop()
	receiveWithin(t, done, "receiver 0's Run returning after Stop")
	if st.FailedStopped != roots {
		t.Fatalf("stats %+v", st)
	}
	if got := a.OldestPending(5); len(got) != 0 {
		t.Fatalf("after Stop: %v", got)
	}
}

// TestHotPathAllocs: in steady state, sending, flushing and polling
// allocate nothing, nor does the executor that applies and routes them
// (AllocsPerRun counts every goroutine's allocations).
func TestHotPathAllocs(t *testing.T) {
	a := started(t, acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 2}, Shard: ackcore.Config{MaxPending: 4096}})
	defer a.Stop()
	p := a.Sender(0)
	rcs := []*acker.Receiver{a.Inbox(0).(*acker.Receiver), a.Inbox(1).(*acker.Receiver)}
	buf := make([]ackcore.Outcome, 0, 1024)
	root, got := uint64(0), 0
	// The round's outcomes, polled (await yields between polls: the
	// executor may be queued behind this goroutine). Made once, so that
	// the rounds AllocsPerRun counts allocate no closure.
	polled := func() bool {
		for _, rc := range rcs {
			buf = rc.Poll(buf[:0])
			got += len(buf)
		}
		return got >= 256
	}
	missing := func() string { return fmt.Sprintf("%d of 256 outcomes after root %d", got, root) }
	round := func() {
		for range 256 {
			root++
			p.Send(ackcore.Msg{Root: root, Kind: ackcore.Init, Task: uint32(root % 2), Val: root})
			p.Send(ackcore.Msg{Root: root, Kind: ackcore.Ack, Val: root})
		}
		p.Flush()
		got = 0
		if err := await(testWait, "the round's 256 outcomes polled", polled, missing); err != nil {
			t.Fatal(err)
		}
	}
	round()
	if invariants.Enabled {
		return // the shard's invariant checks build maps on every step: only the release build's path is counted
	}
	if allocs := testing.AllocsPerRun(200, round); allocs >= 1 {
		t.Fatalf("%.1f allocations per 512 messages", allocs)
	}
}

// TestBacklogNegativeWording: a negative Backlog is named with its range
// and default, not as an overflowed byte count.
func TestBacklogNegativeWording(t *testing.T) {
	_, err := acker.New(acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 1}, Shard: ackcore.Config{MaxPending: 1024}, Backlog: -1})
	want := "acker: Config.Backlog -1 out of range [1, 16777216] (0: DefaultBacklog 4096)"
	if err == nil || err.Error() != want {
		t.Errorf("Backlog -1: %v, want %q", err, want)
	}
}

// TestSpecInboxTable: the one check of a port's shape names the value out of
// range, fills Receivers, and tables each task's inbox.
func TestSpecInboxTable(t *testing.T) {
	for _, tc := range []struct {
		spec acker.Spec
		want string // "" for valid
	}{
		{acker.Spec{Producers: 1, Tasks: 3}, ""},
		{acker.Spec{Producers: 0, Tasks: 3}, "Producers 0 out of range [1, 4096]"},
		{acker.Spec{Producers: 4097, Tasks: 3}, "Producers 4097 out of range [1, 4096]"},
		{acker.Spec{Producers: 1, Tasks: 0}, "Tasks 0 out of range"},
		{acker.Spec{Producers: 1, Tasks: 2, Receivers: 3}, "Receivers 3 out of range [1, Tasks 2]"},
		{acker.Spec{Producers: 1, Tasks: 2, Receivers: 2, ReceiverOf: func(int) int { return 2 }}, "ReceiverOf(0) = 2, out of range"},
	} {
		s, of, err := tc.spec.InboxTable()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.spec, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want one naming %q", tc.spec, err, tc.want)
		case tc.want == "" && (s.Receivers != s.Tasks || len(of) != s.Tasks || of[2] != 2):
			t.Errorf("%+v: filled %+v, table %v", tc.spec, s, of)
		}
	}
}

// started builds an acker from cfg and starts it, failing the test if
// either refuses. The test's cleanup stops it (at once when the test did,
// within DefaultStopTimeout otherwise): a test that fails midway leaves
// no executor running, nor a receiver's Run waiting for the end.
func started(t testing.TB, cfg acker.Config) *acker.Acker {
	t.Helper()
	a, err := acker.New(cfg)
	a = testkit.Started(t, a, err)
	t.Cleanup(func() { _, _ = stopWithin(a, acker.DefaultStopTimeout) })
	return a
}
