package acker_test

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/invariants"
	"go.uber.org/goleak"
)

// stopRaceRound runs producers sending INITs (each pending until Stop, so
// each one applied comes back Failed{stopped}) while Stop lands after
// delay, and checks that every message a send accepted was either applied
// (one outcome) or reported by an error as not applied: accepted =
// outcomes + reported, exactly.
func stopRaceRound(t *testing.T, producers, batch int, delay time.Duration, trySend bool) {
	t.Helper()
	a, err := acker.New(acker.Config{
		Shards: 2, Producers: producers, Tasks: 1, Batch: batch, RingSize: 64,
		Shard: ackcore.Config{MaxPending: 1 << 16},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	var outcomes atomic.Int64
	recvDone := make(chan struct{})
	go func() {
		a.TaskReceiver(0).Run(func(o ackcore.Outcome) {
			if o.Kind != ackcore.Failed || o.Reason != ackcore.ReasonStopped {
				t.Errorf("outcome %+v, want Failed{stopped}", o)
			}
			outcomes.Add(1)
		})
		close(recvDone)
	}()
	var accepted, reported atomic.Int64
	var wg sync.WaitGroup
	for i := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := a.Producer(i)
			var ok, lost int64
			defer func() { accepted.Add(ok); reported.Add(lost) }()
			note := func(err error) bool {
				var na *acker.NotAppliedError
				switch {
				case err == nil:
					return true
				case errors.As(err, &na):
					lost += int64(na.N)
				case !errors.Is(err, acker.ErrClosed):
					t.Errorf("producer %d: %v", i, err)
				}
				return false
			}
			for n := uint64(0); n < 1<<14; n++ {
				m := ackcore.Msg{Root: uint64(i+1)<<32 | n + 1, Kind: ackcore.Init, Val: 1}
				var err error
				if trySend {
					var sent bool
					for !sent && err == nil {
						sent, err = p.TrySend(m)
					}
				} else {
					err = p.Send(m)
				}
				if !note(err) {
					break
				}
				ok++
				if n%97 == 0 && !note(p.Flush()) {
					break
				}
			}
			note(p.Flush())
		}()
	}
	time.Sleep(delay) // not synchronisation: where Stop lands is what varies
	st := a.Stop()
	wg.Wait()
	<-recvDone
	got, acc, rep := outcomes.Load(), accepted.Load(), reported.Load()
	if got+rep != acc || int64(st.FailedStopped) != got {
		t.Fatalf("producers %d batch %d delay %v: accepted %d, outcomes %d + reported %d = %d (FailedStopped %d)",
			producers, batch, delay, acc, got, rep, got+rep, st.FailedStopped)
	}
}

// TestStopRaceSend: Stop at random moments while 6 producers send, with
// Batch 1 and 64, Send and TrySend: nothing accepted is lost without a
// word, and no goroutine is left behind.
func TestStopRaceSend(t *testing.T) {
	defer goleak.VerifyNone(t)
	rounds := 400
	if testing.Short() {
		rounds = 60
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range rounds {
		batch := []int{1, 64}[i%2]
		delay := time.Duration(rng.IntN(2000)) * time.Microsecond
		stopRaceRound(t, 6, batch, delay, i%4 >= 2)
	}
}

// TestOrphanStorm: the acker under a bolt that fails 5% of its inputs after
// fanning out to 4 children, whose ACKs keep arriving after the FAIL (from
// another producer, so also racing the INITs), with a small bound and the
// 30 s timeout on a clock that never reaches it: every root that was not
// failed completes, no INIT is refused, and the shards' memory stays
// within Footprint.
func TestOrphanStorm(t *testing.T) {
	defer goleak.VerifyNone(t)
	roots, bound := 200_000, 3120 // the engine's default bound
	if testing.Short() {
		roots, bound = 40_000, 1500 // 2,000 orphans: still past the bound
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base0, peak := ms.HeapAlloc, uint64(0)
	clock := &ackcore.FakeClock{}
	a, err := acker.New(acker.Config{
		Producers: 2, Tasks: 1,
		Shard: ackcore.Config{MaxPending: bound, Timeout: 30 * time.Second, Clock: clock},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	var completed, failedExplicit, other atomic.Int64
	done := make(chan struct{})
	go func() {
		a.TaskReceiver(0).Run(func(o ackcore.Outcome) {
			switch {
			case o.Kind == ackcore.Completed:
				completed.Add(1)
			case o.Kind == ackcore.Failed && o.Reason == ackcore.ReasonExplicit:
				failedExplicit.Add(1)
			default:
				other.Add(1)
			}
		})
		close(done)
	}()
	spout, bolt := a.Producer(0), a.Producer(1)
	rng := rand.New(rand.NewPCG(11, 12))
	fails := 0
	const window = 1000 // the spout's max pending: trees in flight at once
	for base := 0; base < roots; base += window {
		var edges [window][4]uint64
		for i := range window {
			root := uint64(base+i+1) * 0x9e3779b97f4a7c15
			val := uint64(0)
			for k := range 4 {
				edges[i][k] = rng.Uint64() | 1
				val ^= edges[i][k]
			}
			if err := spout.Send(ackcore.Msg{Root: root, Kind: ackcore.Init, Val: val}); err != nil {
				t.Fatal(err)
			}
		}
		if err := spout.Flush(); err != nil {
			t.Fatal(err)
		}
		for i := range window {
			root := uint64(base+i+1) * 0x9e3779b97f4a7c15
			if rng.IntN(20) == 0 {
				fails++
				if err := bolt.Send(ackcore.Msg{Root: root, Kind: ackcore.Fail}); err != nil {
					t.Fatal(err)
				}
			}
			for k := range 4 {
				if err := bolt.Send(ackcore.Msg{Root: root, Kind: ackcore.Ack, Val: edges[i][k]}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := bolt.Flush(); err != nil {
			t.Fatal(err)
		}
		// Max spout pending: the next window waits for this one's outcomes.
		for completed.Load()+failedExplicit.Load()+other.Load() < int64(base+window) {
			runtime.Gosched()
		}
		if base%(50*window) == 0 && !invariants.Enabled { // the checks allocate
			runtime.GC() // the live heap: what the acker holds
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc-min(ms.HeapAlloc, base0))
		}
	}
	st := a.Stop()
	<-done
	if other.Load() != 0 || st.FailedFull != 0 || int(failedExplicit.Load()) != fails || int(completed.Load()) != roots-fails {
		t.Fatalf("%d roots, %d failed by the bolt: %d completed, %d failed explicit, %d other; stats %+v",
			roots, fails, completed.Load(), failedExplicit.Load(), other.Load(), st)
	}
	if st.OrphansEvicted == 0 {
		t.Fatalf("the orphans never reached the bound: %+v", st)
	}
	t.Logf("%d completed, %d failed; %d orphans evicted; heap peak +%d B", completed.Load(), failedExplicit.Load(), st.OrphansEvicted, peak)
	f := a.Footprint()
	if most := f.Tables + f.Rings + f.OutcomeRings + f.Held + f.Receivers; int64(peak) > most {
		t.Fatalf("heap grew by %d bytes, Footprint %+v (%d)", peak, f, most)
	}
}
