package bench

import (
	"runtime"
	"sync"
	"time"
)

// Stalls is how often a thread that never blocks still lost its CPU, as
// seen by spinning on the monotonic clock: a gap between two consecutive
// clock reads is time the goroutine did not run (an interrupt, the OS or
// the hypervisor running something else, or the Go runtime preempting it
// or borrowing it for GC work). No pipeline's latency percentiles
// can beat these: a message whose path crosses a stalled thread waits out
// the stall, and whatever queued behind it waits too. Rates are per thread
// per second.
type Stalls struct {
	Threads   int     `json:"threads"`
	Seconds   float64 `json:"seconds"` // from the common start to each thread's last read, on average
	Over10us  float64 `json:"over_10us_per_sec"`
	Over100us float64 `json:"over_100us_per_sec"`
	Over1ms   float64 `json:"over_1ms_per_sec"`
	MaxNs     int64   `json:"max_ns"`
	// Lost is the fraction of the time spun that went in gaps of 10µs or
	// more: the share of a processor the machine took from a thread that
	// wanted all of it.
	Lost float64 `json:"lost_fraction"`
}

// A machine is busy, its ratios unreliable, when the spinning threads lost
// busyLost of their time or more, or saw busyOver1ms gaps of 1 ms or more
// per second per thread: a ratio of two rows measured while other work
// took a processor now and then says more about when it did than about the
// ackers. A quiet 2-vCPU machine loses well under 1% (another process
// spinning beside ackbench: half).
const (
	busyLost    = 0.05
	busyOver1ms = 25.0
)

// The verdicts a report states (Report.Verdict).
const (
	verdictBusy  = "machine busy: ratios unreliable; rerun on a quiet machine"
	verdictQuiet = "machine quiet: stalls below the thresholds"
)

// busy says whether s passes either threshold (busyLost, busyOver1ms).
func (s Stalls) busy() bool {
	return s.Threads > 0 && (s.Lost >= busyLost || s.Over1ms >= busyOver1ms)
}

// stallProbe is how long ackbench spins to measure Stalls before its rows
// (quickStallProbe with -quick).
const (
	stallProbe      = 300 * time.Millisecond
	quickStallProbe = 100 * time.Millisecond
)

// stallBounds are the gap lengths Stalls counts, in its field order.
var stallBounds = [3]time.Duration{10 * time.Microsecond, 100 * time.Microsecond, time.Millisecond}

// stallCount is one thread's tally.
type stallCount struct {
	over  [3]int64
	max   time.Duration
	spent time.Duration
	lost  time.Duration // in gaps of stallBounds[0] or more
}

// spin reads now until it reaches end, counting the gaps between reads
// from start, the moment every thread of a measurement was released: a
// thread that began late lost the time before its first read like any
// other gap (a late start is the machine holding the thread off).
func (sc *stallCount) spin(now func() time.Duration, start, end time.Duration) {
	last := start
	for last < end {
		t := now()
		gap := t - last
		last = t
		sc.max = max(sc.max, gap)
		if gap >= stallBounds[0] {
			sc.lost += gap
		}
		for i, b := range stallBounds {
			if gap >= b {
				sc.over[i]++
			}
		}
	}
	sc.spent = last - start
}

// measureStalls spins threads goroutines, each locked to its OS thread, at
// once for d and reports what they saw. Use GOMAXPROCS threads to see the
// machine a pipeline using every processor sees.
func measureStalls(d time.Duration, threads int) Stalls {
	return summarizeStalls(spinThreads(d, threads, func(_ int, spin func()) { spin() }))
}

// spinThreads runs the threads of measureStalls: each, locked to its OS
// thread, calls run(i, spin), which spins from the common start until d
// past it (tests hold a thread back through run).
func spinThreads(d time.Duration, threads int, run func(i int, spin func())) []stallCount {
	counts := make([]stallCount, max(threads, 1))
	base := time.Now()
	now := func() time.Duration { return time.Since(base) }
	start := now()
	end := start + d
	var wg sync.WaitGroup
	for i := range counts {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			run(i, func() { counts[i].spin(now, start, end) })
		})
	}
	wg.Wait()
	return counts
}

func summarizeStalls(counts []stallCount) Stalls {
	s := Stalls{Threads: len(counts)}
	var over [3]int64
	var spent, lost time.Duration
	for _, c := range counts {
		for i := range over {
			over[i] += c.over[i]
		}
		spent += c.spent
		lost += c.lost
		s.MaxNs = max(s.MaxNs, int64(c.max))
	}
	if spent <= 0 {
		return s
	}
	s.Seconds = spent.Seconds() / float64(len(counts))
	rate := func(n int64) float64 { return float64(n) / spent.Seconds() }
	s.Over10us, s.Over100us, s.Over1ms = rate(over[0]), rate(over[1]), rate(over[2])
	s.Lost = lost.Seconds() / spent.Seconds()
	return s
}
