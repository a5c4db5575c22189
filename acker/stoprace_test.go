package acker_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
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
		Shards: 2, Spec: acker.Spec{Producers: producers, Tasks: 1}, Batch: batch, RingSize: 64,
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
