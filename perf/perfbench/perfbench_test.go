package perfbench

import (
	"flag"
	"strings"
	"testing"

	"github.com/xorack/xorack/perf"
)

type metrics map[string]float64

func (m metrics) ReportMetric(n float64, unit string) { m[unit] = n }

// sample returns a real Sample from a Group on this machine: it is the only
// way outside package perf to obtain one with values in it.
func busySample(t *testing.T) perf.Sample {
	t.Helper()
	g, err := perf.Open()
	if err != nil {
		t.Skip(err)
	}
	defer g.Close()
	g.Start()
	x := uint64(1)
	for range 1_000_000 {
		x = x*6364136223846793005 + 1442695040888963407
	}
	sink = x
	g.Stop()
	s, err := g.Read()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var sink uint64

func TestReport(t *testing.T) {
	s := busySample(t)
	st := perf.Probe()

	m := metrics{}
	Report(m, s, 1000)
	for e := range perf.NumEvents {
		unit := e.Unit() + "/op"
		got, reported := m[unit]
		if reported != st.Available(e) {
			t.Errorf("%s reported = %v (%v), available = %v", unit, reported, got, st.Available(e))
		}
	}
	if got := m["task-clock-ns/op"]; got <= 0 {
		t.Errorf("task-clock-ns/op = %v over a busy loop, want > 0", got)
	}
	if !st.Available(perf.Cycles) {
		if _, ok := m["cycles/op"]; ok {
			t.Errorf("cycles/op reported though cycles are unavailable: %v", m)
		}
	}

	m = metrics{}
	Report(m, s, 1000, perf.TaskClock)
	if len(m) != 1 {
		t.Errorf("Report(TaskClock) reported %v, want task-clock-ns/op only", m)
	}
	m = metrics{}
	Report(m, s, 0)
	if len(m) != 0 {
		t.Errorf("Report with 0 ops reported %v", m)
	}
}

// TestStart runs a benchmark through testing.Benchmark, with a fixed small
// iteration count, and checks the metrics it ends with.
func TestStart(t *testing.T) {
	bt := flag.Lookup("test.benchtime")
	if bt == nil {
		t.Skip("no -test.benchtime flag")
	}
	old := bt.Value.String()
	if err := bt.Value.Set("2000x"); err != nil {
		t.Fatal(err)
	}
	defer bt.Value.Set(old)

	res := testing.Benchmark(func(b *testing.B) {
		stop := spin(b)
		stop() // the second call, and the Cleanup one, do nothing
	})
	if res.N != 2000 {
		t.Fatalf("N = %d, want 2000", res.N)
	}
	t.Logf("%s %v", res, res.Extra)
	st := perf.Probe()
	if res.Extra["task-clock-ns/op"] <= 0 {
		t.Errorf("task-clock-ns/op = %v, want > 0", res.Extra["task-clock-ns/op"])
	}
	for e := range perf.NumEvents {
		if _, ok := res.Extra[e.Unit()+"/op"]; ok != st.Available(e) {
			t.Errorf("%s/op reported = %v, available = %v", e.Unit(), ok, st.Available(e))
		}
	}
	for unit := range res.Extra {
		if !strings.HasSuffix(unit, "/op") {
			t.Errorf("unexpected metric %q", unit)
		}
	}
}

// BenchmarkSpin shows the columns Start adds: go test -bench Spin ./perf/perfbench/
func BenchmarkSpin(b *testing.B) { spin(b) }

// spin counts, with Start, 100 steps of a linear congruential generator
// an op; it returns the stop it called.
func spin(b *testing.B) (stop func()) {
	stop = Start(b)
	x := uint64(1)
	for b.Loop() {
		for range 100 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink = x
	stop()
	return stop
}
