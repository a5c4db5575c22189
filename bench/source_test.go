package bench

import (
	"testing"

	"github.com/xorack/xorack/source/kafka/kafkatest"
)

func TestSourceLevel(t *testing.T) {
	rep, err := Run(Config{Levels: []Level{LevelSource}, Msgs: 4000, Reps: 2, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows, want kafka-acked and kafka-unacked", len(rep.Rows))
	}
	for i, impl := range sourceImpls {
		r := rep.Rows[i]
		if r.Level != LevelSource || r.Impl != impl || !r.Verified || r.TreesPerSec <= 0 ||
			r.Roots != 4000 || r.Msgs != 4000*(1+wcWords) || len(r.RepMsgsPerSec) != 2 {
			t.Errorf("row %d: %+v", i, r)
		}
	}
	if rep.Rows[0].P99Ns == nil || rep.Rows[1].P99Ns != nil || rep.Rows[0].Shards != 1 || rep.Rows[1].Shards != 0 {
		t.Error("latency and shards: want them for the acked row only")
	}
}

func TestSourceLevelRejectsFaults(t *testing.T) {
	err := Config{Levels: []Level{LevelSource}, FailRate: 0.1, Impls: []string{"kafka-acked"}}.Validate()
	if err == nil || err.Error() != `bench: impl "kafka-acked" cannot run with fail or drop rates (it has no FAIL or timeout handling)` {
		t.Fatalf("got %v", err)
	}
}

// BenchmarkSource is the source level as a Go benchmark, for profiling:
// b.N records from the in-process Kafka cluster through the word count,
// acked and unacked (run with -count to interleave them).
//
//	go test -run '^$' -bench BenchmarkSource -benchtime 200000x -count 5 ./bench/
func BenchmarkSource(b *testing.B) {
	corpus := newWCCorpus()
	for _, impl := range sourceImpls {
		b.Run("impl="+impl, func(b *testing.B) {
			b.ReportAllocs()
			kc, err := kafkatest.Start(kafkatest.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer kc.Close()
			tp, err := loadTopic(kc, corpus, "sentences", b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			r, err := runSource(kc, corpus, tp, "bench", impl == "kafka-acked", 1, false, 1)
			if err != nil {
				b.Fatal(err)
			}
			if r.err != nil {
				b.Fatal(r.err)
			}
			b.ReportMetric(float64(r.trees)/r.d.Seconds(), "records/s")
			b.ReportMetric(float64(r.tuples)/r.d.Seconds(), "tuples/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
