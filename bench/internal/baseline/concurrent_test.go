package baseline_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/bench/internal/baseline"
	"github.com/xorack/xorack/internal/acktest"
	"github.com/xorack/xorack/internal/acktest/treegen"
)

// TestConcurrent hammers the concurrent baselines: the messages of every
// root are scattered over several producer goroutines calling Apply at
// once (so a root's INIT, ACKs and RESETs race each other), while another
// goroutine moves the clock, calls Expire and reads Stats. Whatever the
// interleaving, every root must end exactly once, Completed or
// Failed{Timeout}, and the counters must add up.
func TestConcurrent(t *testing.T) {
	roots, producers := 3000, 4
	if testing.Short() {
		roots = 600
	}
	for _, b := range impls {
		if b.name != "mutexmap" && b.name != "xsyncmap" {
			continue
		}
		t.Run(b.name, func(t *testing.T) { hammer(t, b, roots, producers) })
	}
}

func hammer(t *testing.T, b impl, nroots, producers int) {
	rng := rand.New(rand.NewPCG(uint64(nroots), 11))
	evs, roots := treegen.Generate(rng, treegen.Options{
		Roots: nroots, MaxFanout: 3, MaxDepth: 3, JoinProb: 0.2, ResetProb: 0.02,
		CustomProb: 0.05, MaxTimeout: 40, Tasks: 5,
	})
	var acks, resets uint64
	lists := make([][]ackcore.Msg, producers)
	for _, e := range evs {
		switch e.Msg.Kind {
		case ackcore.Ack:
			acks++
		case ackcore.Reset:
			resets++
		}
		p := rng.IntN(producers)
		lists[p] = append(lists[p], e.Msg)
	}
	const timeout = 20 * time.Millisecond
	clock := &ackcore.FakeClock{}
	a := mustMake(t, b, baseline.Config{MaxPending: len(evs), Timeout: timeout, Tick: time.Millisecond, Clock: clock})

	results := make([][]ackcore.Outcome, producers+1) // the expirer's last
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			prng := rand.New(rand.NewPCG(uint64(p), 5))
			msgs := lists[p]
			var out []ackcore.Outcome
			for len(msgs) > 0 {
				n := min(1+prng.IntN(16), len(msgs))
				out = a.Apply(msgs[:n], out)
				msgs = msgs[n:]
			}
			results[p] = out
		}(p)
	}
	done := make(chan struct{})
	expired := make(chan []ackcore.Outcome)
	go func() {
		var all []ackcore.Outcome
		room := make([]ackcore.Outcome, 0, 16)
		for {
			select {
			case <-done:
				expired <- all
				return
			default:
			}
			clock.Add(10 * time.Microsecond)
			for more := true; more; {
				room, more = a.Expire(room[:0])
				all = append(all, room...)
			}
			if st := a.Stats(); st.Pending < 0 || st.Completed+st.FailedTimeout > uint64(nroots) {
				t.Errorf("stats during the run: %+v", st)
			}
		}
	}()
	wg.Wait()
	close(done)
	results[producers] = <-expired

	// Drain: everything left times out (custom timeouts reach 40 ms).
	clock.Add(10 * timeout)
	room := make([]ackcore.Outcome, 0, 16)
	for more := true; more; {
		room, more = a.Expire(room[:0])
		results[producers] = append(results[producers], room...)
	}

	ended := map[uint64]int{}
	var completed, timedOut int
	for _, out := range results {
		c, f := acktest.Tally(t, out, ackcore.ReasonTimeout)
		completed, timedOut = completed+c, timedOut+f
		for _, o := range out {
			ended[o.Root]++
		}
	}
	for _, r := range roots {
		if ended[r] != 1 {
			t.Fatalf("root %#x ended %d times", r, ended[r])
		}
	}
	st := a.Stats()
	want := ackcore.Stats{
		Inits: uint64(nroots), Acks: acks, Resets: resets,
		Completed: uint64(completed), FailedTimeout: uint64(timedOut), Orphans: st.Orphans,
	}
	if st != want {
		t.Fatalf("stats\n got  %+v\n want %+v", st, want)
	}
	if err := a.(interface{ Verify() error }).Verify(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d roots: %d completed, %d timed out, %d orphans", nroots, completed, timedOut, st.Orphans)
}
