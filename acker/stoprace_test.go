package acker_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/testkit"
)

// stopRaceConfig is the Stop-race tests' acker: 2 shards, one task,
// small rings (64 messages), so that sends wait for room and spans turn
// over often.
func stopRaceConfig(producers, batch int) acker.Config {
	return acker.Config{
		Shards: 2, Spec: acker.Spec{Producers: producers, Tasks: 1}, Batch: batch, RingSize: 64,
		Shard: ackcore.Config{MaxPending: stopRaceBound},
	}
}

// stopRaceBound is the Stop-race tests' MaxPending: 65,536, or 4,096 in
// the invariant build, where every step of a shard checks its whole table
// (O(slots)): there the larger table held TestStopRaceLastSend to 19 of
// its 200 short rounds in its 10 s. The shards apply INITs there slower
// still, so Stop lands as early in a round's sends.
var stopRaceBound = testkit.SizeUnderInvariants(1<<16, 1<<12)

// stopRaceSends is how many INITs a producer of a Stop-race round sends
// at most: 16,383, or its share of stopRaceBound if less, so that every
// INIT is pending until Stop (none refused Full), however late Stop lands.
func stopRaceSends(producers int) uint64 { return uint64(min(1<<14-1, stopRaceBound/producers)) }

// stopRaceRound runs producers sending INITs (each pending until Stop, so
// each one applied comes back Failed{stopped}) while Stop lands after
// delay, and checks, for each producer, that every message its sends
// accepted was either applied (one outcome) or reported not applied,
// once: counted by Stop (StopError.Unflushed) or by the producer's own
// calls (NotAppliedError). accepted = outcomes + reported, exactly, and
// NotApplied says the same.
//
// The receiver takes with Run, or (waitUntil) with WaitUntil on a wake
// channel that always fires, so that it gives up waiting as often as it
// can: each time the last outcomes may land just as it does.
//
// It returns how many messages Stop counted and how many the producers'
// calls reported.
func stopRaceRound(t *testing.T, producers, batch int, delay time.Duration, trySend, waitUntil bool) (byStop, byCalls int64) {
	t.Helper()
	a := started(t, stopRaceConfig(producers, batch))
	outcomes := make([]int64, producers) // by producer: root>>32 - 1; written by the receiver
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		see := func(o ackcore.Outcome) {
			if o.Kind != ackcore.Failed || o.Reason != ackcore.ReasonStopped {
				t.Errorf("outcome %+v, want Failed{stopped}", o)
			}
			outcomes[o.Root>>32-1]++
		}
		rc := a.Inbox(a.ReceiverOf(0)).(*acker.Receiver)
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
		wg.Go(func() {
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
			for n := range stopRaceSends(producers) {
				m := ackcore.Msg{Root: uint64(i+1)<<32 | n + 1, Kind: ackcore.Init, Val: 1}
				var err error
				if trySend {
					err = trySendWithin(p, m, testWait)
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
		})
	}
	time.Sleep(delay) // not synchronisation: where Stop lands is what varies
	st, stopErr := stopWithin(a, testWait)
	if err := within(testWait, "the producers returning after Stop", wg.Wait); err != nil {
		t.Fatal(err)
	}
	receiveWithin(t, recvDone, "the receiver returning after Stop")
	counted := make([]int64, producers) // by Stop
	var se *acker.StopError
	if errors.As(stopErr, &se) {
		if se.Err != nil || se.Receivers != nil {
			t.Fatalf("StopContext: %v", stopErr)
		}
		for _, u := range se.Unflushed {
			if u.Staged < 1 || len(u.Shards) < 1 || counted[u.Producer] != 0 {
				t.Fatalf("StopContext named %+v: %v", u, stopErr)
			}
			counted[u.Producer] = int64(u.Staged)
		}
	} else if stopErr != nil {
		t.Fatalf("StopContext: %v", stopErr)
	}
	var all int64
	for i := range producers {
		all += outcomes[i]
		byStop += counted[i]
		byCalls += reported[i]
		rep := counted[i] + reported[i]
		if outcomes[i]+rep != accepted[i] || a.NotApplied(i) != uint64(rep) {
			t.Fatalf("producers %d batch %d delay %v trySend %v waitUntil %v: producer %d: accepted %d, outcomes %d + counted by Stop %d + reported by its calls %d = %d; NotApplied %d",
				producers, batch, delay, trySend, waitUntil, i, accepted[i], outcomes[i], counted[i], reported[i], outcomes[i]+rep, a.NotApplied(i))
		}
	}
	if st.FailedStopped != uint64(all) {
		t.Fatalf("stats: FailedStopped %d, outcomes %d", st.FailedStopped, all)
	}
	return byStop, byCalls
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

// raceRounds sets up a Stop-race test: its rounds and time bound (the
// short ones with -short), two busy processes beside it for that long,
// and the source of its delays, seeded from the clock (logged) on stream.
func raceRounds(t *testing.T, rounds int, bound time.Duration, shortRounds int, shortBound time.Duration, stream uint64) (int, time.Duration, *rand.Rand) {
	t.Helper()
	if testing.Short() {
		rounds, bound = shortRounds, shortBound
	}
	busyLoops(t, 2, bound+30*time.Second)
	seed := uint64(time.Now().UnixNano())
	t.Logf("delays drawn with seed %d", seed)
	return rounds, bound, rand.New(rand.NewPCG(seed, stream))
}

// TestStopRaceSend: Stop at random moments while 6 producers send, with
// Batch 1 and 64, Send and TrySend, the receiver taking with Run and with
// WaitUntil, beside two busy processes that take
// the CPUs from the acker's goroutines at any instant: nothing accepted is
// lost without a word, and no goroutine is left behind. 1,200 rounds (300
// with -short), fewer if they pass the time bound (25 s, 15 s with
// -short) on a slow machine. Most rounds land where it matters (Stop
// counts staged messages in about half of them, the producers' calls
// report some in most), and TestStopUnflushed checks Stop's count one
// case at a time: more rounds add little but CI minutes, with two busy
// processes taking the CPUs from every other package's tests meanwhile.
func TestStopRaceSend(t *testing.T) {
	rounds, bound, rng := raceRounds(t, 1200, 25*time.Second, 300, 15*time.Second, 2)
	start := time.Now()
	i, stopped, called := 0, 0, 0
	for ; i < rounds && time.Since(start) < bound; i++ {
		batch := []int{1, 64}[i%2]
		delay := time.Duration(rng.IntN(2000)) * time.Microsecond
		byStop, byCalls := stopRaceRound(t, 6, batch, delay, i%4 >= 2, i%8 >= 4)
		if byStop > 0 {
			stopped++
		}
		if byCalls > 0 {
			called++
		}
	}
	t.Logf("%d rounds in %v beside 2 busy processes; messages not applied counted by Stop in %d rounds, reported by the producers' calls in %d",
		i, time.Since(start).Round(time.Millisecond), stopped, called)
}

// TestStopRaceLastSend: producers send INITs without Flush until Stop
// lands, each ending at its first refused send or at a halt set around
// Stop, and none calls again after its last send: what a send that
// returned nil staged after Stop counted is reported by no later call,
// so NotApplied alone must account for it: accepted = outcomes +
// NotApplied, exactly, for every producer, over 800 rounds (200 with
// -short; fewer past the time bound, 15 s, 10 s with -short) beside two
// busy processes. The interleaving it hunts (a send staging past Stop's
// count, its producer quiet after) comes up in about one round in a
// hundred; TestStopLateStage plays it step by step every run.
func TestStopRaceLastSend(t *testing.T) {
	rounds, bound, rng := raceRounds(t, 800, 15*time.Second, 200, 10*time.Second, 3)
	const producers = 6
	start := time.Now()
	i, late := 0, 0
	for ; i < rounds && time.Since(start) < bound; i++ {
		batch := []int{1, 4, 64}[i%3]
		a := started(t, stopRaceConfig(producers, batch))
		outcomes := make([]int64, producers) // by producer; written by the receiver
		recvDone := make(chan struct{})
		go func() {
			defer close(recvDone)
			a.Inbox(0).(*acker.Receiver).Run(func(o ackcore.Outcome) { outcomes[o.Root>>32-1]++ })
		}()
		var halt atomic.Bool
		accepted := make([]int64, producers)
		refused := make([]bool, producers) // its last send returned an error
		var wg sync.WaitGroup
		for j := range producers {
			wg.Go(func() {
				p := a.Sender(j)
				for n := uint64(1); n <= stopRaceSends(producers) && !halt.Load(); n++ {
					if p.Send(ackcore.Msg{Root: uint64(j+1)<<32 | n, Kind: ackcore.Init, Val: 1}) != nil {
						refused[j] = true // the error reports its own count (NotAppliedError), in NotApplied too
						return
					}
					accepted[j]++
				}
			})
		}
		delay := time.Duration(rng.IntN(1000)) * time.Microsecond
		time.Sleep(delay) // not synchronisation: where Stop lands is what varies
		go func() {
			runtime.Gosched()
			halt.Store(true)
		}()
		_, stopErr := stopWithin(a, testWait)
		if err := within(testWait, "the producers returning after Stop", wg.Wait); err != nil {
			t.Fatal(err)
		}
		receiveWithin(t, recvDone, "the receiver returning after Stop")
		var se *acker.StopError
		if stopErr != nil && (!errors.As(stopErr, &se) || se.Err != nil || se.Receivers != nil) {
			t.Fatalf("StopContext: %v", stopErr)
		}
		counted := make([]uint64, producers)
		if se != nil {
			for _, u := range se.Unflushed {
				counted[u.Producer] = uint64(u.Staged)
			}
		}
		for j := range producers {
			na := a.NotApplied(j)
			if outcomes[j]+int64(na) != accepted[j] {
				t.Fatalf("round %d, batch %d, delay %v: producer %d: accepted %d, outcomes %d + NotApplied %d (Stop counted %d) = %d",
					i, batch, delay, j, accepted[j], outcomes[j], na, counted[j], outcomes[j]+int64(na))
			}
			if na < counted[j] {
				t.Fatalf("round %d: producer %d: NotApplied %d below Stop's count %d", i, j, na, counted[j])
			}
			if na > counted[j] && !refused[j] {
				late++
			}
		}
	}
	t.Logf("%d rounds in %v beside 2 busy processes; %d producers whose last send returned nil had NotApplied beyond Stop's count (staged after Stop counted)",
		i, time.Since(start).Round(time.Millisecond), late)
}
