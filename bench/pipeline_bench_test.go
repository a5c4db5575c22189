package bench

import (
	"fmt"
	"sync"
	"testing"

	"github.com/xorack/xorack/internal/acktest/workload"
)

// BenchmarkAcker is ackbench's pipeline level as a Go benchmark: the same
// producers, cursors and shares (pipeline.go, pipeproducer.go, stream.go), the same pipes
// (package bench/internal/pipeline) and the same verification, run through
// benchPipeline on one word-count stream with benchPending roots pending.
// A sub-benchmark is one pipeline row of b.N measured messages in one
// rep, after the prefix and a 50 ms warm-up (Config.Quick's); the timer
// runs during the measured messages alone, and the latency run is left
// to ackbench (-level pipeline).
//
// For each producer count the baselines run first, mutexmap (one
// baseline.MutexMap that every producer applies its batches to under its
// lock) then chanshard (one xorack shard fed by a Go channel), then
// xorack (acker.Acker) with each shard count, so that a figure stands
// beside its baseline: ns/op is per message, msgs/s and trees/s are the
// row's, and on the other impls' rows x-mutexmap is msgs/s over the
// mutexmap row of the same producers in this run.
func BenchmarkAcker(b *testing.B) {
	st := benchStream()
	base := map[int]float64{} // producers -> mutexmap's msgs/s
	for _, c := range benchPipes() {
		sh := benchShares(st, c.producers)
		b.Run(c.String(), func(b *testing.B) {
			b.StopTimer()
			b.ResetTimer()
			b.ReportAllocs()
			cfg := Config{Impls: []string{c.impl}, Producers: c.producers, Shards: c.shards, Msgs: int64(b.N), Quick: true}
			row, err := benchPipeline(cfg, st, sh, benchPending, b, false)
			if err != nil {
				b.Fatal(err)
			}
			if !row.Verified {
				b.Fatalf("%v: not verified: %s", c, row.VerifyError)
			}
			b.ReportMetric(row.MsgsPerSec, "msgs/s")
			b.ReportMetric(row.TreesPerSec, "trees/s")
			if c.impl == "mutexmap" {
				base[c.producers] = row.MsgsPerSec
			} else if x := base[c.producers]; x > 0 {
				b.ReportMetric(row.MsgsPerSec/x, "x-mutexmap")
			}
		})
	}
}

// BenchmarkAckerFaults is BenchmarkAcker's row under faults: 5% of the
// roots failed after their fan-out (the FAIL carrying its tuple's val,
// the later ACKs emptying the drain it leaves), one producer, one shard,
// beside its fault-free twin run first on the same clock, timeout and
// bound (as ackbench -fail pairs them, but one after the other, not rep
// by rep), at P = 10k and 100k. x-fault-free is the fault row's msgs/s
// over its twin's of the same run; every row is verified.
func BenchmarkAckerFaults(b *testing.B) {
	for _, p := range []int{10_000, benchPending} {
		st := benchStream()
		if p != benchPending {
			st = newStream(workload.Build(workload.WordCount, p, DefaultSeed))
		}
		sh := st.shares(1)
		for _, impl := range []string{"mutexmap", Reference} {
			var base float64
			for _, twin := range []bool{true, false} {
				fail := "0.05"
				if twin {
					fail = "0"
				}
				b.Run(fmt.Sprintf("impl=%s/P=%d/fail=%s", impl, p, fail), func(b *testing.B) {
					b.StopTimer()
					b.ResetTimer()
					cfg := Config{Impls: []string{impl}, Producers: 1, Shards: 1, Msgs: int64(b.N), Quick: true, FailRate: 0.05}
					row, err := benchPipeline(cfg, st, sh, p, b, twin)
					if err != nil {
						b.Fatal(err)
					}
					if !row.Verified {
						b.Fatalf("not verified: %s", row.VerifyError)
					}
					b.ReportMetric(row.MsgsPerSec, "msgs/s")
					if twin {
						base = row.MsgsPerSec
					} else if base > 0 {
						b.ReportMetric(row.MsgsPerSec/base, "x-fault-free")
					}
				})
			}
		}
	}
}

// benchPending is BenchmarkAcker's pending window: past L3 on this
// project's machines, as acker's pipeline benchmarks always ran it.
const benchPending = 100_000

// benchStream is BenchmarkAcker's stream, built once per process.
var benchStream = sync.OnceValue(func() *stream {
	return newStream(workload.Build(workload.WordCount, benchPending, DefaultSeed))
})

var benchShareCache sync.Map // producers -> []*share of benchStream

// benchShares is st's split among n producers, once per process.
func benchShares(st *stream, n int) []*share {
	if v, ok := benchShareCache.Load(n); ok {
		return v.([]*share)
	}
	sh := st.shares(n)
	benchShareCache.Store(n, sh)
	return sh
}

// benchPipe names one sub-benchmark of BenchmarkAcker.
type benchPipe struct {
	impl              string
	shards, producers int
}

func (c benchPipe) String() string {
	return fmt.Sprintf("impl=%s/shards=%d/producers=%d", c.impl, c.shards, c.producers)
}

// benchPipes lists BenchmarkAcker's pipelines: per producer count, the
// baselines, then xorack at each shard count.
func benchPipes() []benchPipe {
	counts := []int{1, 2, 4}
	if testing.Short() {
		counts = counts[:2]
	}
	var cs []benchPipe
	for _, n := range counts {
		cs = append(cs, benchPipe{"mutexmap", 1, n}, benchPipe{"chanshard", 1, n})
		for _, s := range counts {
			cs = append(cs, benchPipe{Reference, s, n})
		}
	}
	return cs
}

// countTimer counts a benchmark timer's starts and stops.
type countTimer struct{ starts, stops int }

func (t *countTimer) StartTimer() { t.starts++ }
func (t *countTimer) StopTimer()  { t.stops++ }

// TestBenchPipeline runs BenchmarkAcker's entry point for each impl on a
// small window: the row is verified, holds the messages asked for, and
// the timer ran once, around the peak rep, with no latency run.
func TestBenchPipeline(t *testing.T) {
	st := newStream(workload.Build(workload.WordCount, 2000, DefaultSeed))
	for _, c := range []benchPipe{{"mutexmap", 1, 2}, {"chanshard", 1, 2}, {Reference, 2, 2}, {Reference, 1, 1}} {
		var tm countTimer
		cfg := Config{Impls: []string{c.impl}, Producers: c.producers, Shards: c.shards, Msgs: 20_000, Quick: true}
		row, err := benchPipeline(cfg, st, st.shares(c.producers), 2000, &tm, false)
		switch {
		case err != nil:
			t.Fatalf("%v: %v", c, err)
		case !row.Verified:
			t.Errorf("%v: not verified: %s", c, row.VerifyError)
		case row.Msgs != 20_000 || row.MsgsPerSec <= 0:
			t.Errorf("%v: %d msgs at %v msgs/s, want 20000", c, row.Msgs, row.MsgsPerSec)
		case tm.starts != 1 || tm.stops != 1:
			t.Errorf("%v: timer started %d and stopped %d times, want 1 each", c, tm.starts, tm.stops)
		case row.LatencyRate != 0:
			t.Errorf("%v: a latency run at %v msgs/s", c, row.LatencyRate)
		case row.Shards != c.shards:
			t.Errorf("%v: row has %d shards", c, row.Shards)
		}
	}
	if _, err := benchPipeline(Config{Impls: []string{Reference, "mutexmap"}, Msgs: 10}, st, st.shares(1), 2000, &countTimer{}, false); err == nil {
		t.Error("two impls: no error")
	}
	if _, err := benchPipeline(Config{Impls: []string{Reference}, Msgs: 10}, st, st.shares(1), 2000, &countTimer{}, true); err == nil {
		t.Error("a twin without faults: no error")
	}
	// BenchmarkAckerFaults' pair: the twin runs on its fault row's clock.
	cfg := Config{Impls: []string{Reference}, Msgs: 20_000, Quick: true, FailRate: 0.05}
	tw, err := benchPipeline(cfg, st, st.shares(1), 2000, &countTimer{}, true)
	row, err2 := benchPipeline(cfg, st, st.shares(1), 2000, &countTimer{}, false)
	if err != nil || err2 != nil || !tw.Verified || !row.Verified || tw.FailRate != 0 || row.FailRate != 0.05 ||
		tw.Clock != "stream" || tw.Clock != row.Clock || tw.TimeoutNs != row.TimeoutNs || tw.MaxPending != row.MaxPending || row.InjectedFail == 0 {
		t.Errorf("twin %+v (%v), fault row %+v (%v)", tw, err, row, err2)
	}
}
