package bench

import (
	"testing"
)

func TestTopologyLevel(t *testing.T) {
	rep := runOK(t, Config{Levels: []Level{LevelTopology}, Msgs: 6000, Reps: 2, NoPin: true})
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows, want acked and unacked", len(rep.Rows))
	}
	for i, impl := range []string{"acked", "unacked"} {
		r := rep.Rows[i]
		if r.Level != LevelTopology || r.Impl != impl || !r.Verified || r.TreesPerSec <= 0 ||
			r.Roots != 6000 || r.Msgs != 6000*(1+wcWords) || len(r.RepMsgsPerSec) != 2 {
			t.Errorf("row %d: %+v", i, r)
		}
	}
	if rep.Rows[0].P99Ns == nil || rep.Rows[1].P99Ns != nil {
		t.Error("latency: want it for the acked row only")
	}
}

func TestWCCorpusWant(t *testing.T) {
	c := newWCCorpus()
	for _, n := range []int{0, 1, wcSentences, wcSentences + 5, 3*wcSentences + 100} {
		total := 0
		for _, k := range c.want(n) {
			total += k
		}
		if total != n*wcWords {
			t.Errorf("want(%d) counts %d words, want %d", n, total, n*wcWords)
		}
	}
}

// BenchmarkTopology is the topology level as a Go benchmark, for
// profiling: b.N sentences through the word count, acked and unacked (run
// with -count to interleave them).
//
//	go test -run '^$' -bench BenchmarkTopology -count 5 ./bench/
//	go test -run '^$' -bench 'BenchmarkTopology/impl=acked' -benchtime 2000000x -cpuprofile cpu.prof ./bench/
func BenchmarkTopology(b *testing.B) {
	corpus := newWCCorpus()
	for _, impl := range topologyImpls {
		b.Run("impl="+impl, func(b *testing.B) {
			b.ReportAllocs()
			r, err := runWordcount(corpus, b.N, impl == "acked", 1, false, 1)
			if err != nil {
				b.Fatal(err)
			}
			if r.err != nil {
				b.Fatal(r.err)
			}
			b.ReportMetric(float64(r.trees)/r.d.Seconds(), "trees/s")
			b.ReportMetric(float64(r.tuples)/r.d.Seconds(), "tuples/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
