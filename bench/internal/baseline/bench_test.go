package baseline_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/bench/internal/baseline"
	"github.com/xorack/xorack/internal/acktest/workload"
)

// BenchmarkBaselines is a quick sanity run, not the comparison (that is
// bench/'s): each baseline, and the shard beside them, replays a steady
// word-count stream with about `pending` roots in flight, in batches of 64,
// one goroutine, a fake clock that never reaches a timeout. One op is one
// message.
//
//	go test -run=^$ -bench=Baselines -benchtime=100ms ./bench/internal/baseline/
func BenchmarkBaselines(b *testing.B) {
	const batch = 64
	all := append([]impl{{name: "shard", make: func(c baseline.Config) (ackcore.Interface, error) {
		return ackcore.NewShard(ackcore.Config{MaxPending: c.MaxPending, Timeout: c.Timeout, Clock: c.Clock})
	}}}, impls...)
	for _, pending := range []int{10_000, 100_000} {
		st := workload.Build(workload.WordCount, pending, 1)
		for _, im := range all {
			b.Run(fmt.Sprintf("impl=%s/pending=%d", im.name, pending), func(b *testing.B) {
				a := mustMake(b, im, baseline.Config{MaxPending: st.MaxPending(), Timeout: time.Minute, Clock: &ackcore.FakeClock{}})
				out := make([]ackcore.Outcome, 0, batch)
				applyAll(a, st.Prefix, batch, out)
				applyAll(a, st.Cycle, batch, out) // warm: maps at their working size
				cyc, pos := st.Cycle, 0
				b.ReportAllocs()
				b.ResetTimer()
				for done := 0; done < b.N; {
					n := min(batch, len(cyc)-pos)
					out = a.Apply(cyc[pos:pos+n], out[:0])
					done += n
					if pos += n; pos == len(cyc) {
						pos = 0
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mmsgs/s")
			})
		}
	}
}
