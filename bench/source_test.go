package bench

import (
	"slices"
	"strings"
	"testing"

	"github.com/xorack/xorack/source/kafka/kafkatest"
)

func TestSourceLevel(t *testing.T) {
	rep := runOK(t, Config{Levels: []Level{LevelSource}, Msgs: 4000, Reps: 2, NoPin: true})
	if len(rep.Rows) != len(sourceImpls) {
		t.Fatalf("%d rows, want %v", len(rep.Rows), sourceImpls)
	}
	for i, impl := range sourceImpls {
		r := rep.Rows[i]
		if r.Level != LevelSource || r.Impl != impl || !r.Verified || r.TreesPerSec <= 0 ||
			r.Roots != 4000 || r.Msgs != 4000*(1+wcWords) || len(r.RepMsgsPerSec) != 2 {
			t.Errorf("row %d: %+v", i, r)
		}
		acked := impl != "kafka-unacked"
		if (r.P99Ns != nil) != acked || (r.Shards == 1) != acked {
			t.Errorf("row %s: latency %v, shards %d: want both for the acked rows only", impl, r.P99Ns != nil, r.Shards)
		}
		// The brokers' rows divided by the in-memory spout's, same run.
		base := rep.Rows[slices.Index(sourceImpls, srcBaseline)].TreesPerSec
		switch impl {
		case "kafka-acked", "jetstream-acked":
			if want := r.TreesPerSec / base; r.BaselineRatio != want {
				t.Errorf("row %s: baseline ratio %v, want %v", impl, r.BaselineRatio, want)
			}
			if r.CPURatio <= 0 || r.WallBestRatio < r.BaselineRatio {
				t.Errorf("row %s: CPU ratio %v, best wall ratio %v (median %v)", impl, r.CPURatio, r.WallBestRatio, r.BaselineRatio)
			}
		default:
			if r.BaselineRatio != 0 || r.CPURatio != 0 || r.WallBestRatio != 0 {
				t.Errorf("row %s: ratios %v %v %v, want none", impl, r.BaselineRatio, r.CPURatio, r.WallBestRatio)
			}
		}
	}
	var notes, cpuNotes, startups int
	for _, n := range rep.Notes {
		if strings.Contains(n, "/ memory-acked sentences/s") {
			notes++
		}
		// The gated ratio, rep by rep.
		if strings.Contains(n, " / memory-acked rep by rep, records/s: ") && strings.Contains(n, "records per CPU-second: ") {
			cpuNotes++
		}
		// Every row's startup, left out of its records/s, is noted
		// apart, over the timed reps.
		if strings.Contains(n, " startup (Start to the first record split") && strings.HasSuffix(n, "over 2 reps") {
			startups++
		}
	}
	if notes != 2 || cpuNotes != 2 {
		t.Errorf("notes %q: want kafka-acked's and jetstream-acked's ratios to memory-acked", rep.Notes)
	}
	if startups != len(sourceImpls) {
		t.Errorf("notes %q: want a startup note per row", rep.Notes)
	}
}

// The gate fails kafka-acked below SourceFloor times the in-memory
// spout, jetstream-acked below JetStreamFloor, and only then.
func TestCheckSourceFloor(t *testing.T) {
	// The median rep's wall-clock ratio is reported, not gated.
	row := func(impl string, wall, cpu float64) Row {
		return Row{Level: LevelSource, Impl: impl, Shape: "wordcount", Verified: true, WallBestRatio: wall, CPURatio: cpu, BaselineRatio: 0.01}
	}
	core := []Row{{Level: LevelCore, Impl: Reference, Shape: "wordcount", Pending: 10_000, MsgsPerSec: 3, Verified: true},
		{Level: LevelCore, Impl: GoMapName, Shape: "wordcount", Pending: 10_000, MsgsPerSec: 1, Verified: true}}
	for _, tc := range []struct {
		rows []Row
		fail string // what the one failure names; "" for none
	}{
		{[]Row{row("kafka-acked", 0.81, 0.81), row("jetstream-acked", 0.3, 0.3)}, ""},
		{[]Row{row("kafka-acked", 0.9, 0.79)}, "records per CPU-second"},
		{[]Row{row("kafka-acked", 0.79, 0.9)}, "records/s"},
		{[]Row{row("kafka-acked", 0.9, 0.9), row("jetstream-acked", 0.11, 0.11)}, ""},
		{[]Row{row("kafka-acked", 0.9, 0.9), row("jetstream-acked", 0.5, 0.09)}, "records per CPU-second"},
		{[]Row{row("kafka-unacked", 0.01, 0.01)}, ""}, // no floor of its own
		{[]Row{row("kafka-acked", 0, 0)}, ""},         // no baseline in the run
	} {
		bad := Check(&Report{Rows: append(slices.Clone(core), tc.rows...)}, 2)
		if fail := len(bad) > 0; fail != (tc.fail != "") {
			t.Errorf("rows %+v: check %q, want failing %v", tc.rows, bad, tc.fail != "")
		}
		if tc.fail != "" && (len(bad) != 1 || !strings.Contains(bad[0], "the in-memory spout's "+tc.fail+" in the same run, best rep")) {
			t.Errorf("check %q: want the source floor named, for %s", bad, tc.fail)
		}
	}
}

func TestSourceLevelRejectsFaults(t *testing.T) {
	err := Config{Levels: []Level{LevelSource}, FailRate: 0.1, Impls: []string{"kafka-acked"}}.Validate()
	if err == nil || err.Error() != `bench: Config.Impls: impl "kafka-acked" cannot run with fail or drop rates (it has no FAIL or timeout handling)` {
		t.Fatalf("got %v", err)
	}
}

// BenchmarkSource is the source level as a Go benchmark, for profiling:
// b.N records from the in-process Kafka cluster through the word count,
// acked and unacked, beside the in-memory spout's word count (the level's
// baseline; run with -count to interleave them).
//
//	go test -run '^$' -bench BenchmarkSource -benchtime 200000x -count 5 ./bench/
func BenchmarkSource(b *testing.B) {
	corpus := newWCCorpus()
	for _, impl := range []string{"kafka-acked", "kafka-unacked", srcBaseline} {
		b.Run("impl="+impl, func(b *testing.B) {
			b.ReportAllocs()
			if impl == srcBaseline {
				r, err := runWordcount(corpus, b.N, true, 1, false, 1)
				if err != nil {
					b.Fatal(err)
				}
				if r.err != nil {
					b.Fatal(r.err)
				}
				reportSource(b, r)
				return
			}
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
			reportSource(b, r)
		})
	}
}

// reportSource reports a BenchmarkSource run: its records and tuples per
// second, and the process's CPU time per tuple (Start to Stop).
func reportSource(b *testing.B, r wcResult) {
	b.ReportMetric(float64(r.trees)/r.d.Seconds(), "records/s")
	b.ReportMetric(float64(r.tuples)/r.d.Seconds(), "tuples/s")
	b.ReportMetric(float64(r.cpu)/float64(r.tuples), "cpu-ns/tuple")
	b.ReportMetric(0, "ns/op")
}

// The gated ratios pair the reps that ran side by side and leave out a
// rep without a figure.
func TestPairRatios(t *testing.T) {
	got := pairRatios([]float64{100, 100, 0, 100}, []float64{80, 200, 100})
	if want := []float64{0.8, 2}; !slices.Equal(got, want) {
		t.Errorf("pairRatios = %v, want %v", got, want)
	}
}
