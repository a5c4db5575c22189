package timerwheel

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// Benchmark shape. Every case first populates `live` timers (untimed), then
// times one operation against that population:
//
//   - op=schedule-cancel: schedule a timer on a spare handle, cancel it (the
//     acker's common case: a root completes long before its timeout);
//   - op=schedule-expire: take the earliest pending timer, whatever its
//     deadline, and schedule it again (the timeout path in steady state; the
//     wheel's clock jumps to each deadline, so this includes cascading).
//
// Deadlines are drawn uniformly from benchSpread ticks ahead: timeouts up
// to 60 s at a 1 ms tick, so timers sit in levels 0 to 2 and cascade.
// B/timer is the live heap growth from populating the timers (the whole
// structure, including the wheel's 320 sentinels and spare handles), divided
// by live.
const (
	benchSpread = 60_000
	// benchSpares is the number of handles beyond the live ones that
	// schedule-cancel cycles through: more than one, so consecutive
	// operations do not hit one node, and a power of two for the mask.
	benchSpares = 1024
	// benchDelays is the length of the precomputed delay table (a power of
	// two), so drawing a random delay costs a load, not a generator call.
	benchDelays = 4096
)

var benchLive = []int{1000, 1_000_000, 10_000_000}

func benchDelayTable() []Tick {
	r := rand.New(rand.NewPCG(1, 2))
	d := make([]Tick, benchDelays)
	for i := range d {
		d[i] = 1 + r.Uint64N(benchSpread-1)
	}
	return d
}

// liveHeap returns the bytes of live heap objects after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func bytesPer(before, after uint64, live int) float64 {
	if after < before {
		return 0
	}
	return float64(after-before) / float64(live)
}

func BenchmarkTimers(b *testing.B) {
	impls := []struct {
		name string
		ops  map[string]func(b *testing.B, live int)
	}{
		{"wheel", map[string]func(*testing.B, int){
			"schedule-cancel": benchWheelCancel,
			"schedule-expire": benchWheelExpire,
		}},
		{"heap", map[string]func(*testing.B, int){
			"schedule-cancel": benchHeapCancel,
			"schedule-expire": benchHeapExpire,
		}},
		// time.AfterFunc has schedule-cancel only: expiring runtime timers
		// needs real time to pass, and this suite does not sleep.
		{"afterfunc", map[string]func(*testing.B, int){
			"schedule-cancel": benchAfterFuncCancel,
		}},
	}
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			for _, op := range []string{"schedule-cancel", "schedule-expire"} {
				f := impl.ops[op]
				if f == nil {
					continue
				}
				b.Run("op="+op, func(b *testing.B) {
					for _, live := range benchLive {
						b.Run(fmt.Sprintf("live=%d", live), func(b *testing.B) {
							if live >= 10_000_000 && testing.Short() {
								b.Skip("live=10000000 skipped in -short mode")
							}
							f(b, live)
							runtime.GC() // return the population before the next case
						})
					}
				})
			}
		})
	}
}

// newBenchWheel populates handles [0, live) and returns the wheel with
// benchSpares unscheduled handles after them, the delay table and its
// B/timer.
func newBenchWheel(b *testing.B, live int) (*Wheel, []Tick, float64) {
	var w *Wheel
	delays, bpt := populate(b, live, func() { w = New(live+benchSpares, 0) }, func(h Handle, d Tick) { w.Schedule(h, d) })
	return w, delays, bpt
}

// populate makes a timer set (build) and schedules handles [0, live) on
// it, their deadlines spread over benchSpread ticks, and returns the
// delay table and the set's B/timer. Allocations are reported from the
// benchmark loop on.
func populate(b *testing.B, live int, build func(), schedule func(Handle, Tick)) ([]Tick, float64) {
	delays := benchDelayTable()
	before := liveHeap()
	build()
	for h := range Handle(live) {
		schedule(h, delays[h%benchDelays]+Tick(h)%benchSpread)
	}
	b.ReportAllocs()
	return delays, bytesPer(before, liveHeap(), live)
}

func benchWheelCancel(b *testing.B, live int) {
	w, delays, bpt := newBenchWheel(b, live)
	for i := 0; b.Loop(); i++ {
		h := Handle(live + i&(benchSpares-1))
		w.Schedule(h, w.Now()+delays[i&(benchDelays-1)])
		w.Cancel(h)
	}
	reportTimers(b, bpt, w.Len(), live)
}

func benchWheelExpire(b *testing.B, live int) {
	w, delays, bpt := newBenchWheel(b, live)
	for i := 0; b.Loop(); i++ {
		h, ok := w.Expire(w.Now() + MaxDelay)
		if !ok {
			b.Fatal("nothing to expire")
		}
		w.Schedule(h, w.Now()+delays[i&(benchDelays-1)])
	}
	reportTimers(b, bpt, w.Len(), live)
}

// reportTimers reports the B/timer of a population of live timers and
// fails the benchmark unless the set still holds exactly them (n).
func reportTimers(b *testing.B, bpt float64, n, live int) {
	b.ReportMetric(bpt, "B/timer")
	if n != live {
		b.Fatalf("len %d, want %d", n, live)
	}
}

// timerHeap is the baseline: a binary heap from container/heap ordered by
// deadline, with each handle's index kept in pos so cancel is O(log n).
// New items are appended and sifted with heap.Fix, and Pop returns nil, so
// no interface boxing allocates.
type timerHeap struct {
	items []heapItem
	pos   []int32 // pos[h] is h's index in items, or -1
}

type heapItem struct {
	deadline Tick
	h        Handle
}

func (q *timerHeap) Len() int           { return len(q.items) }
func (q *timerHeap) Less(i, j int) bool { return q.items[i].deadline < q.items[j].deadline }
func (q *timerHeap) Swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.pos[q.items[i].h] = int32(i)
	q.pos[q.items[j].h] = int32(j)
}
func (q *timerHeap) Push(any) { panic("timerHeap: use schedule") }
func (q *timerHeap) Pop() any {
	it := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	q.pos[it.h] = -1
	return nil
}

func (q *timerHeap) schedule(h Handle, d Tick) {
	q.items = append(q.items, heapItem{d, h})
	q.pos[h] = int32(len(q.items) - 1)
	heap.Fix(q, len(q.items)-1)
}

func (q *timerHeap) cancel(h Handle) {
	heap.Remove(q, int(q.pos[h]))
}

// newBenchHeap is newBenchWheel for the heap.
func newBenchHeap(b *testing.B, live int) (*timerHeap, []Tick, float64) {
	var q *timerHeap
	delays, bpt := populate(b, live, func() {
		q = &timerHeap{items: make([]heapItem, 0, live+benchSpares), pos: make([]int32, live+benchSpares)}
		for i := range q.pos {
			q.pos[i] = -1
		}
	}, func(h Handle, d Tick) { q.schedule(h, d) })
	return q, delays, bpt
}

func benchHeapCancel(b *testing.B, live int) {
	q, delays, bpt := newBenchHeap(b, live)
	now := Tick(0)
	for i := 0; b.Loop(); i++ {
		h := Handle(live + i&(benchSpares-1))
		q.schedule(h, now+delays[i&(benchDelays-1)])
		q.cancel(h)
	}
	reportTimers(b, bpt, q.Len(), live)
}

func benchHeapExpire(b *testing.B, live int) {
	q, delays, bpt := newBenchHeap(b, live)
	for i := 0; b.Loop(); i++ {
		it := q.items[0]
		heap.Pop(q)
		q.schedule(it.h, it.deadline+delays[i&(benchDelays-1)])
	}
	reportTimers(b, bpt, q.Len(), live)
}

// benchNop is the one callback every runtime timer shares, so populating
// timers allocates no closures.
func benchNop() {}

func benchAfterFuncCancel(b *testing.B, live int) {
	delays := benchDelayTable()
	before := liveHeap()
	timers := make([]*time.Timer, live)
	for i := range timers {
		// An hour and more ahead: none fires during the benchmark.
		timers[i] = time.AfterFunc(time.Hour+time.Duration(delays[i%benchDelays]+Tick(i)%benchSpread)*time.Millisecond, benchNop)
	}
	bpt := bytesPer(before, liveHeap(), live)
	b.Cleanup(func() {
		for _, t := range timers {
			t.Stop()
		}
	})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		t := time.AfterFunc(time.Hour+time.Duration(delays[i&(benchDelays-1)])*time.Millisecond, benchNop)
		t.Stop()
	}
	b.ReportMetric(bpt, "B/timer")
}
