package acker_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
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
// outcomes + reported, exactly. Stop names exactly the producers whose
// calls reported messages not applied (their spans were open at the seal).
//
// The receiver takes with Run, or (waitUntil) with WaitUntil on a wake
// channel that always fires, so that it gives up waiting as often as it
// can: each time the last outcomes may land just as it does.
func stopRaceRound(t *testing.T, producers, batch int, delay time.Duration, trySend, waitUntil bool) {
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
		defer close(recvDone)
		see := func(o ackcore.Outcome) {
			if o.Kind != ackcore.Failed || o.Reason != ackcore.ReasonStopped {
				t.Errorf("outcome %+v, want Failed{stopped}", o)
			}
			outcomes.Add(1)
		}
		rc := a.Receiver(a.ReceiverOf(0))
		if !waitUntil {
			rc.Run(see)
			return
		}
		fired := make(chan time.Time)
		close(fired)
		var buf []ackcore.Outcome
		for ok := true; ok; {
			buf, ok = rc.WaitUntil(buf[:0], fired)
			for _, o := range buf {
				see(o)
			}
		}
	}()
	accepted := make([]int64, producers)
	reported := make([]int64, producers)
	var wg sync.WaitGroup
	for i := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := a.Sender(i)
			note := func(err error) bool {
				var na *acker.NotAppliedError
				switch {
				case err == nil:
					return true
				case errors.As(err, &na):
					reported[i] += int64(na.N)
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
				accepted[i]++
				if n%97 == 0 && !note(p.Flush()) {
					break
				}
			}
			note(p.Flush())
		}()
	}
	time.Sleep(delay) // not synchronisation: where Stop lands is what varies
	st, stopErr := a.StopContext(context.Background())
	wg.Wait()
	<-recvDone
	var acc, rep int64
	var lost []int
	for i := range producers {
		acc += accepted[i]
		rep += reported[i]
		if reported[i] > 0 {
			lost = append(lost, i)
		}
	}
	got := outcomes.Load()
	if got+rep != acc || int64(st.FailedStopped) != got {
		t.Fatalf("producers %d batch %d delay %v trySend %v waitUntil %v: accepted %d, outcomes %d + reported %d = %d (stats: INITs %d, FailedStopped %d)",
			producers, batch, delay, trySend, waitUntil, acc, got, rep, got+rep, st.Inits, st.FailedStopped)
	}
	var named []int
	var se *acker.StopError
	if errors.As(stopErr, &se) {
		for _, u := range se.Unflushed {
			named = append(named, u.Producer)
		}
	} else if stopErr != nil {
		t.Fatalf("StopContext: %v", stopErr)
	}
	if !slices.Equal(named, lost) {
		t.Fatalf("batch %d trySend %v: Stop named producers %v as unflushed, the producers reported losses %v (%v)", batch, trySend, named, lost, reported)
	}
}

// busyEnv makes the test binary a busy loop (TestBusyLoop) until the Unix
// time in nanoseconds it holds.
const busyEnv = "XORACK_ACKER_BUSY_UNTIL"

// TestBusyLoop is the busy process busyLoops starts; run directly, it
// skips.
func TestBusyLoop(t *testing.T) {
	until, err := strconv.ParseInt(os.Getenv(busyEnv), 10, 64)
	if err != nil {
		t.Skip("a helper process: busy until ", busyEnv)
	}
	for time.Now().UnixNano() < until {
		for range 1 << 16 {
		}
	}
}

// busyLoops starts n processes that keep a CPU busy (this test binary
// running TestBusyLoop), each ending by itself after at most limit, and
// killed, by its own PID, when the test ends.
func busyLoops(t *testing.T, n int, limit time.Duration) {
	t.Helper()
	for range n {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBusyLoop$", "-test.count=1")
		cmd.Env = append(os.Environ(), busyEnv+"="+strconv.FormatInt(time.Now().Add(limit).UnixNano(), 10))
		if err := cmd.Start(); err != nil {
			t.Fatalf("busy loop: %v", err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
}

// TestStopRaceSend: Stop at random moments while 6 producers send, with
// Batch 1 and 64, Send and TrySend, the receiver taking with Run and with
// WaitUntil, beside two busy processes that take
// the CPUs from the acker's goroutines at any instant: nothing accepted is
// lost without a word, and no goroutine is left behind. 3,000 rounds (300
// with -short), fewer if they pass the time bound (a minute, 15 s with
// -short) on a slow machine.
func TestStopRaceSend(t *testing.T) {
	defer goleak.VerifyNone(t)
	rounds, bound := 3000, time.Minute
	if testing.Short() {
		rounds, bound = 300, 15*time.Second
	}
	busyLoops(t, 2, bound+30*time.Second)
	seed := uint64(time.Now().UnixNano())
	t.Logf("delays drawn with seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	start := time.Now()
	i := 0
	for ; i < rounds && time.Since(start) < bound; i++ {
		batch := []int{1, 64}[i%2]
		delay := time.Duration(rng.IntN(2000)) * time.Microsecond
		stopRaceRound(t, 6, batch, delay, i%4 >= 2, i%8 >= 4)
	}
	t.Logf("%d rounds in %v beside 2 busy processes", i, time.Since(start).Round(time.Millisecond))
}
