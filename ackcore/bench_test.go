package ackcore_test

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/acktest/workload"
	"github.com/xorack/xorack/internal/splitmix"
)

// benchBatch is the batch the benchmark hands Apply: what a shard loop
// drains from its rings at once.
const benchBatch = 256

// expireEvery is how many batches pass between Expire calls, as a shard
// loop ticking every millisecond at a few tens of millions msgs/s would.
const expireEvery = 64

var streams sync.Map // "shape/P" -> *workload.Stream

func stream(shape workload.Shape, p int) *workload.Stream {
	key := fmt.Sprintf("%s/%d", shape.Name, p)
	if st, ok := streams.Load(key); ok {
		return st.(*workload.Stream)
	}
	st := workload.Build(shape, p, 1)
	streams.Store(key, st)
	return st
}

type benchImpl struct {
	name string
	make func(cfg ackcore.Config) (ackcore.Interface, error)
}

var benchImpls = []benchImpl{
	{"xorack", func(cfg ackcore.Config) (ackcore.Interface, error) { return ackcore.NewShard(cfg) }},
}

// BenchmarkShard replays a steady stream with P roots pending through one
// single-writer acker, xorack's shard (the side-by-side with a Go map
// acker of identical semantics is ackbench's core level: go run
// ./cmd/ackbench -level core). ns/op is per message.
// B/root is the heap the acker holds (table, timers, everything) divided
// by the roots pending, measured after warm-up.
func BenchmarkShard(b *testing.B) {
	ps := []int{10_000, 100_000, 1_000_000}
	if testing.Short() {
		ps = ps[:2]
	}
	for _, shape := range []workload.Shape{workload.WordCount, workload.Tree8x8} {
		for _, p := range ps {
			for _, impl := range benchImpls {
				b.Run(fmt.Sprintf("impl=%s/shape=%s/P=%d", impl.name, shape.Name, p), func(b *testing.B) {
					benchAcker(b, impl, stream(shape, p))
				})
			}
		}
	}
}

func benchAcker(b *testing.B, impl benchImpl, st *workload.Stream) {
	before := heapInUse()
	a, err := impl.make(ackcore.Config{MaxPending: st.MaxPending()})
	if err != nil {
		b.Fatal(err)
	}
	out := make([]ackcore.Outcome, 0, benchBatch)
	for i := 0; i < len(st.Prefix); i += benchBatch {
		out = a.Apply(st.Prefix[i:min(i+benchBatch, len(st.Prefix))], out[:0])
	}
	// Run into the cycle (half of it, at most 2M messages) so the acker has
	// seen deletes and reinserts, then weigh it.
	half := min(len(st.Cycle)/2, 2_000_000) / benchBatch * benchBatch
	for i := 0; i < half; i += benchBatch {
		out = a.Apply(st.Cycle[i:i+benchBatch], out[:0])
	}
	pending := a.Stats().Pending
	bytes := float64(heapInUse() - before)
	pos := half
	cyc := st.Cycle
	b.ReportAllocs()
	b.ResetTimer()
	for n, batches := 0, 0; n < b.N; n += benchBatch {
		end := pos + benchBatch
		if end > len(cyc) {
			end = len(cyc)
		}
		if rem := b.N - n; end-pos > rem {
			end = pos + rem
		}
		out = a.Apply(cyc[pos:end], out[:0])
		if pos = end; pos == len(cyc) {
			pos = 0
		}
		if batches++; batches%expireEvery == 0 {
			out, _ = a.Expire(out[:0])
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(bytes/float64(pending), "B/root")
	if s := a.Stats(); s.Failed() != 0 || s.RefusedFull != 0 || s.RefusedInvalid != 0 {
		b.Fatalf("benchmark stream failed roots: %+v", s)
	}
	runtime.KeepAlive(a)
}

// timeoutStream is st with each root's timing varied: "per-root" gives
// every INIT its own timeout, uniform in 1-60 s (whole milliseconds, fixed
// per root); "reset" sends one RESET per root, just before its first ACK
// (about P messages after its INIT, so the entry is as cold as a real
// RESET finds it). "default" is st itself.
func timeoutStream(st *workload.Stream, mode string) *workload.Stream {
	key := fmt.Sprintf("%s/%d/%s", st.Shape.Name, st.Pending, mode)
	if v, ok := streams.Load(key); ok {
		return v.(*workload.Stream)
	}
	out := *st
	switch mode {
	case "per-root":
		set := func(msgs []ackcore.Msg) []ackcore.Msg {
			c := append([]ackcore.Msg(nil), msgs...)
			for i := range c {
				if c[i].Kind == ackcore.Init {
					c[i].TimeoutMs = 1000 + uint32(splitmix.Nth(c[i].Root)%59_001)
				}
			}
			return c
		}
		out.Prefix, out.Cycle = set(st.Prefix), set(st.Cycle)
	case "reset":
		// A root's first ACK is the message after its INIT in tree order:
		// the one whose predecessor in its tree was the INIT.
		last := make(map[uint64]ackcore.Kind, len(st.Roots))
		add := func(msgs []ackcore.Msg) []ackcore.Msg {
			c := make([]ackcore.Msg, 0, len(msgs)+len(msgs)/st.K+1)
			for _, m := range msgs {
				if m.Kind == ackcore.Ack && last[m.Root] == ackcore.Init {
					c = append(c, ackcore.Msg{Root: m.Root, Kind: ackcore.Reset})
				}
				last[m.Root] = m.Kind
				c = append(c, m)
			}
			return c
		}
		out.Prefix = add(st.Prefix)
		out.Cycle = add(st.Cycle)
	}
	streams.Store(key, &out)
	return &out
}

// BenchmarkShardTimeouts replays the word-count stream with every root on
// the default timeout, every root with its own timeout (uniform 1-60 s),
// and every root RESET once, through one shard in the same run: msgs/s and
// B/root (the heap the shard holds per pending root) side by side.
func BenchmarkShardTimeouts(b *testing.B) {
	ps := []int{100_000, 1_000_000}
	if testing.Short() {
		ps = ps[:1]
	}
	for _, p := range ps {
		for _, mode := range []string{"default", "per-root", "reset"} {
			b.Run(fmt.Sprintf("timeouts=%s/P=%d", mode, p), func(b *testing.B) {
				benchAcker(b, benchImpls[0], timeoutStream(stream(workload.WordCount, p), mode))
			})
		}
	}
}

// BenchmarkMassExpiry ends a wave of P roots, all made at once, three
// ways; one op is one wave (its INITs are not timed):
//   - end=timeout: they time out together, found after an hour's pause;
//   - end=timeout-ticking: they time out together while Expire runs every
//     tick (the clock moved 1 ms per call) from their INIT on;
//   - end=completed: each is acked and completes.
//
// Expire gets room for 1024 outcomes a call and is called until it says
// no more, as the sharded acker does; Apply gets batches of 256. total-ns
// is the wave's time in those calls (for end=timeout-ticking, the 30,000
// ticks' Expire calls), max-call-ns the longest single call by the wall
// clock, max-call-cpu-ns by the thread's CPU clock (which does not count
// the times the shared VM deschedules the thread; where there is none it
// reports 0; the VM's steal time still counts), p999-call-ns the 99.9th
// percentile of the calls. The garbage collector is off during a wave,
// so that a GC cycle's assists do not land in one call.
func BenchmarkMassExpiry(b *testing.B) {
	ps := []int{1_000_000}
	if testing.Short() {
		ps = []int{100_000}
	}
	for _, p := range ps {
		for _, end := range []string{"timeout", "timeout-ticking", "completed"} {
			b.Run(fmt.Sprintf("P=%d/end=%s", p, end), func(b *testing.B) {
				clock := &ackcore.FakeClock{}
				s := mustShard(b, ackcore.Config{MaxPending: p, Clock: clock})
				inits := make([]ackcore.Msg, p)
				acks := make([]ackcore.Msg, p)
				out := make([]ackcore.Outcome, 0, 1024)
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				var total, longest time.Duration
				var longestCPU int64
				var calls []time.Duration
				timed := func(f func()) {
					c0, _ := threadCPU()
					t0 := time.Now()
					f()
					d := time.Since(t0)
					c1, _ := threadCPU()
					total += d
					longest = max(longest, d)
					longestCPU = max(longestCPU, c1-c0)
					calls = append(calls, d)
				}
				drain := func() (n int) {
					for more := true; more; {
						timed(func() { out, more = s.Expire(out[:0]) })
						n += len(out)
					}
					return n
				}
				b.ResetTimer()
				for op := 0; op < b.N; op++ {
					b.StopTimer()
					base := uint64(op) * uint64(p)
					for i := range inits {
						r := splitmix.Nth(base+uint64(i)+1) | 1
						inits[i] = ackcore.Msg{Root: r, Kind: ackcore.Init, Task: uint32(i % 16), Val: r}
						acks[i] = ackcore.Msg{Root: r, Kind: ackcore.Ack, Val: r}
					}
					for i := 0; i < p; i += benchBatch {
						s.Apply(inits[i:min(i+benchBatch, p)], out[:0])
					}
					runtime.GC()
					gc := debug.SetGCPercent(-1)
					b.StartTimer()
					ended := 0
					switch end {
					case "timeout":
						clock.Add(time.Hour)
						ended = drain()
					case "timeout-ticking":
						for range 30_001 {
							clock.Add(time.Millisecond)
							ended += drain()
						}
					case "completed":
						for i := 0; i < p; i += benchBatch {
							timed(func() { out = s.Apply(acks[i:min(i+benchBatch, p)], out[:0]) })
							ended += len(out)
						}
					}
					b.StopTimer()
					debug.SetGCPercent(gc)
					if ended != p || s.Pending() != 0 {
						b.Fatalf("%d of %d roots ended, %d pending", ended, p, s.Pending())
					}
					b.StartTimer()
				}
				b.StopTimer()
				b.ReportMetric(float64(longestCPU), "max-call-cpu-ns")
				slices.Sort(calls)
				b.ReportMetric(float64(calls[len(calls)*999/1000].Nanoseconds()), "p999-call-ns")
				b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "total-ns")
				b.ReportMetric(float64(longest.Nanoseconds()), "max-call-ns")
				b.ReportMetric(float64(s.NearBytes()), "near-B-after")
			})
		}
	}
}
