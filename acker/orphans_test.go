package acker_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/invariants"
	"github.com/xorack/xorack/internal/splitmix"
)

// orphanStormWait bounds TestOrphanStorm's wait for one window's outcomes:
// milliseconds on a quiet machine, far below this on a loaded one.
const orphanStormWait = 30 * time.Second

// TestOrphanStorm: the acker under a bolt that fails 5% of its inputs after
// fanning out to 4 children, whose ACKs keep arriving after the FAIL (from
// another producer, so also racing the INITs), with a small bound and the
// 30 s timeout on a clock that never reaches it: every root that was not
// failed completes, no INIT is refused, and the shards' memory stays
// within Footprint. A lost outcome fails the test after orphanStormWait,
// naming the roots without one, rather than hanging it (the clock never
// times them out), and the test's cleanup (started's) then stops the
// acker, which ends the receiver's Run.
func TestOrphanStorm(t *testing.T) {
	roots, bound := 200_000, 3120 // the engine's default bound
	if testing.Short() {
		roots, bound = 40_000, 1500 // 2,000 orphans: still past the bound
	}
	// Root k (from 1) is k*Golden; Golden is odd, so k is root*inverse.
	inverse := uint64(splitmix.Golden)
	for range 5 { // Newton's iteration, each doubling the correct low bits (3 to 96)
		inverse *= 2 - splitmix.Golden*inverse
	}
	if inverse*splitmix.Golden != 1 {
		t.Fatalf("%#x is not Golden's inverse", inverse)
	}
	answered := make([]atomic.Bool, roots) // by k-1: the root got an outcome (allocated before the heap's base)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base0, peak := ms.HeapAlloc, uint64(0)
	clock := &ackcore.FakeClock{}
	a := started(t, acker.Config{
		Spec: acker.Spec{Producers: 2, Tasks: 1}, Shard: ackcore.Config{MaxPending: bound, Timeout: 30 * time.Second, Clock: clock},
	})
	var completed, failedExplicit, other atomic.Int64
	done := make(chan struct{})
	go func() {
		a.Inbox(a.ReceiverOf(0)).(*acker.Receiver).Run(func(o ackcore.Outcome) {
			if k := o.Root * inverse; k-1 < uint64(roots) {
				answered[k-1].Store(true)
			} else {
				other.Add(1) // a root never sent
				return
			}
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
	spout, bolt := a.Sender(0), a.Sender(1)
	rng := rand.New(rand.NewPCG(11, 12))
	fails := 0
	const window = 1000 // the spout's max pending: trees in flight at once
	for base := 0; base < roots; base += window {
		var edges [window][4]uint64
		for i := range window {
			root := uint64(base+i+1) * splitmix.Golden
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
		var failed [window]bool
		for i := range window {
			root := uint64(base+i+1) * splitmix.Golden
			if rng.IntN(20) == 0 {
				fails++
				failed[i] = true
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
		if err := await(orphanStormWait, "an outcome for every tree of the window",
			func() bool { return completed.Load()+failedExplicit.Load()+other.Load() >= int64(base+window) },
			func() string {
				var missing []string
				for i := range window {
					if !answered[base+i].Load() {
						missing = append(missing, fmt.Sprintf("%#x (failed by the bolt: %v)", uint64(base+i+1)*splitmix.Golden, failed[i]))
					}
				}
				return fmt.Sprintf("%d roots of trees %d-%d without one: %s; %d completed, %d failed explicit, %d other; stats %+v",
					len(missing), base+1, base+window, strings.Join(missing[:min(len(missing), 5)], ", "),
					completed.Load(), failedExplicit.Load(), other.Load(), a.Stats())
			}); err != nil {
			t.Fatal(err)
		}
		if base%(50*window) == 0 && !invariants.Enabled { // the checks allocate
			runtime.GC() // the live heap: what the acker holds
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc-min(ms.HeapAlloc, base0))
		}
	}
	st := a.Stop()
	receiveWithin(t, done, "the receiver's Run returning after Stop")
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
