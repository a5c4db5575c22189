package ackcore_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/bench"
	"github.com/xorack/xorack/bench/baseline"
	"github.com/xorack/xorack/bench/workload"
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
	make func(cfg ackcore.Config) (ackcore.Acker, error)
}

var benchImpls = []benchImpl{
	{"xorack", func(cfg ackcore.Config) (ackcore.Acker, error) { return ackcore.NewShard(cfg) }},
	{"xorack-fold", func(cfg ackcore.Config) (ackcore.Acker, error) {
		cfg.Fold = ackcore.FoldOn
		return ackcore.NewShard(cfg)
	}},
	{"gomap", func(cfg ackcore.Config) (ackcore.Acker, error) {
		return baseline.NewGoMap(baseline.FromShardConfig(cfg))
	}},
}

// BenchmarkShard replays a steady stream with P roots pending through one
// single-writer acker: xorack's shard (folding off and on) beside a Go map
// acker of identical semantics, in the same run. ns/op is per message.
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
	before := bench.HeapInUse()
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
	bytes := float64(bench.HeapInUse() - before)
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
