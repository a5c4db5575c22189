package bench

import (
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/perf"
)

// heapInUse is the live heap: two collections (the first may leave
// floating garbage that the second frees), then HeapAlloc. Benchmarks
// weigh an acker by the difference across its construction and warm-up.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// spareThreads has the runtime start n OS threads more than it needs now
// and leave them idle, so that the threads it wants during a measured
// setup (for the collector's workers, beside a runner that holds its own)
// come from its idle pool. Each thread it starts costs the heap about 5.5
// KB of its own structures (5,576 bytes in go1.26.8), which a reading
// across the setup would charge to the acker measured: 0 to 4 threads a
// setup put 0.6 to 2.2 bytes a root on the core level at P = 10k. The
// runtime never frees an idle thread, so spares started once stay.
func spareThreads(n int) {
	var held, release sync.WaitGroup
	release.Add(1)
	held.Add(n)
	var done sync.WaitGroup
	for range n {
		done.Go(func() {
			runtime.LockOSThread() // each holds a thread of its own while it waits
			held.Done()
			release.Wait()
			runtime.UnlockOSThread() // its thread goes back to the idle pool
		})
	}
	held.Wait()
	release.Done()
	done.Wait()
}

// gcMark is a point in the collector's history.
type gcMark struct {
	cycles  uint32
	pauseNs uint64
}

func readGC() gcMark {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return gcMark{cycles: ms.NumGC, pauseNs: ms.PauseTotalNs}
}

// gcSum accumulates collector work over several measured phases.
type gcSum struct {
	cycles  uint32
	pauseNs uint64
}

func (s *gcSum) add(from, to gcMark) {
	s.cycles += to.cycles - from.cycles
	s.pauseNs += to.pauseNs - from.pauseNs
}

// counterSum accumulates perf counts over several measured phases. An
// event is known only if every phase measured it (perf's rule: never a
// partial count presented as the whole).
type counterSum struct {
	n      [perf.NumEvents]uint64
	known  [perf.NumEvents]bool
	phases int
}

func (s *counterSum) add(d perf.Sample) {
	for e := range perf.NumEvents {
		v := d.Get(e)
		if s.phases == 0 {
			s.known[e] = v.OK
		} else if !v.OK {
			s.known[e] = false
		}
		s.n[e] += v.N
	}
	s.phases++
}

// perMsg returns every event per message, nil for the unknown ones.
func (s *counterSum) perMsg(msgs int64) map[string]*float64 {
	m := make(map[string]*float64, perf.NumEvents)
	for e := range perf.NumEvents {
		m[e.Unit()] = nil
		if s.phases > 0 && s.known[e] && msgs > 0 {
			x := float64(s.n[e]) / float64(msgs)
			m[e.Unit()] = &x
		}
	}
	return m
}

// newHist is a latency histogram from 1 ns to 1 hour at 3 significant
// digits (0.1% resolution: what a p99.9 needs).
func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(time.Hour), 3)
}

func record(h *hdrhistogram.Histogram, d time.Duration) {
	_ = h.RecordValue(max(int64(d), 1)) // beyond an hour: dropped, counted nowhere
}

// latency is a histogram's summary; nil fields when it holds nothing.
type latency struct {
	p50, p99, p999, max *int64
	count               int64
}

func summarize(h *hdrhistogram.Histogram) latency {
	if h == nil || h.TotalCount() == 0 {
		return latency{}
	}
	v := func(x int64) *int64 { return &x }
	return latency{
		p50: v(h.ValueAtQuantile(50)), p99: v(h.ValueAtQuantile(99)),
		p999: v(h.ValueAtQuantile(99.9)), max: v(h.Max()), count: h.TotalCount(),
	}
}

// tally counts the outcomes a run saw, by kind and reason.
type tally struct {
	n [4][8]uint64 // [OutcomeKind][Reason]
}

// add counts out. Plain completions, nearly all outcomes, are summed in a
// local: an increment of the one counter in memory per outcome made a
// chain of dependent stores inside the core level's timed calls, work the
// C++ anchors' harness, which counts in registers, does not time.
func (t *tally) add(out []ackcore.Outcome) {
	var done uint64
	for i := range out {
		o := &out[i]
		if o.Kind == ackcore.Completed && o.Reason == ackcore.ReasonNone {
			done++
			continue
		}
		t.n[o.Kind&3][o.Reason&7]++
	}
	t.n[ackcore.Completed][ackcore.ReasonNone] += done
}

func (t *tally) completed() uint64 { return t.sum(ackcore.Completed) }
func (t *tally) explicit() uint64  { return t.n[ackcore.Failed][ackcore.ReasonExplicit] }
func (t *tally) timedOut() uint64  { return t.n[ackcore.Failed][ackcore.ReasonTimeout] }
func (t *tally) refused() uint64   { return t.sum(ackcore.Refused) }
func (t *tally) failed() uint64    { return t.sum(ackcore.Failed) }
func (t *tally) sum(k ackcore.OutcomeKind) uint64 {
	var s uint64
	for _, x := range t.n[k&3] {
		s += x
	}
	return s
}

func (t *tally) merge(o *tally) {
	for k := range t.n {
		for r := range t.n[k] {
			t.n[k][r] += o.n[k][r]
		}
	}
}

// pairRatios is the paired ratio of two rows rep by rep: row[k] /
// base[k] for each rep k both ran (the shorter length), leaving out a
// rep with no baseline (base[k] not above 0) or no figure of its own
// (row[k] NaN or negative). A row's 0 is a figure: the ratio 0 (a rep
// whose goodput collapsed must count against a floor, not vanish). The
// gated ratios are their median or their best.
func pairRatios(row, base []float64) []float64 {
	var out []float64
	for k := range min(len(row), len(base)) {
		if base[k] > 0 && row[k] >= 0 { // false for NaN too
			out = append(out, row[k]/base[k])
		}
	}
	return out
}

// median is the middle of xs (the mean of the middle two for an even
// count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
