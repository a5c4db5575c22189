package bench

import (
	"slices"
	"strings"
	"testing"
)

// TestFaultsLevel runs the fault matrix small: one row per fault, every
// sentence ended once, no healthy sentence dead-lettered, the poison
// dead-lettered, replays where failures were injected.
func TestFaultsLevel(t *testing.T) {
	rep := runOK(t, Config{Levels: []Level{LevelFaults}, Msgs: 4000, Reps: 1, NoPin: true})
	cases := faultCases()
	if len(rep.Rows) != len(cases) {
		t.Fatalf("%d rows, want %d", len(rep.Rows), len(cases))
	}
	for i, r := range rep.Rows {
		fs := r.FaultStats
		if r.Level != LevelFaults || fs == nil || fs.Fault != cases[i].fault || !r.Verified || fs.HealthyDead != 0 || fs.Goodput <= 0 {
			t.Errorf("row %s: %+v %+v", r.Name(), r, fs)
			continue
		}
		// Replays where failures were injected, none fault-free (the slow
		// row's timeouts depend on the machine's speed: its floor, not a
		// test's, under -race).
		injected := cases[i].fail > 0 || cases[i].drop > 0 || cases[i].poison > 0 || cases[i].panic > 0
		if !cases[i].slow && injected != (fs.Replays > 0) {
			t.Errorf("row %s: %d replays", r.Name(), fs.Replays)
		}
		if cases[i].poison > 0 && fs.PoisonDead == 0 {
			t.Errorf("row %s: no poison dead-lettered", r.Name())
		}
	}
	var sb strings.Builder
	if err := WriteTable(&sb, rep); err != nil || !strings.Contains(sb.String(), "faults: fail") || !strings.Contains(sb.String(), "faults: breaker") {
		t.Errorf("table: %v\n%s", err, sb.String())
	}
	// The breaker row is gated on the mixed row, its twin with the
	// breaker off; the join row's trees complete on the clock's ticks;
	// the panic row's panics were injected, and it is paired; the stop
	// row stopped at half.
	for i, r := range rep.Rows {
		fs := r.FaultStats
		switch cases[i].fault {
		case "breaker":
			if !fs.Gated || fs.GoodputRatio <= 0 || fs.GoodputFloor <= 0 {
				t.Errorf("breaker row: gated %v, paired ratio %v, floor %v", fs.Gated, fs.GoodputRatio, fs.GoodputFloor)
			}
		case "join":
			if fs.Gated || r.Completed == 0 {
				t.Errorf("join row: gated %v, %d completed", fs.Gated, r.Completed)
			}
		case "panic":
			if fs.Panics == 0 || fs.VsFail <= 0 || fs.GoodputFloor <= 0 {
				t.Errorf("panic row: %d panics, vs fail %v, floor %v", fs.Panics, fs.VsFail, fs.GoodputFloor)
			}
		case "stop":
			// Stopped at half: at least half emitted, and as many acked,
			// the rest never asked for.
			if fs.StopNs <= 0 || r.Roots < 2000 || r.Roots > 4000 || r.Completed != r.Roots-fs.StoppedTotal {
				t.Errorf("stop row: Stop took %v, %d emitted, %d acked, %d stopped", fs.StopNs, r.Roots, r.Completed, fs.StoppedTotal)
			}
		}
	}
	t.Logf("\n%s", sb.String())
}

// TestFaultsCheck: -check fails on a breaker row below its floor, names
// it and says why, and passes it above.
func TestFaultsCheck(t *testing.T) {
	rep := synthetic(60e6, 20e6)
	row := Row{Level: LevelFaults, Impl: Reference, Shape: "wordcount", FailRate: faultsMixedFail, Verified: true,
		FaultStats: &FaultStats{Fault: "breaker", Gated: true, FloorMet: false, Floor: "goodput 0.50 x the mixed row's"}}
	rep.Rows = append(rep.Rows, row)
	bad := Check(rep, 1)
	if !slices.ContainsFunc(bad, func(s string) bool { return strings.Contains(s, "fault=breaker: goodput 0.50 x the mixed row's") }) {
		t.Errorf("check of a breaker row below its floor: %q", bad)
	}
	rep.Rows[len(rep.Rows)-1].FaultStats.FloorMet = true
	if bad := Check(rep, 1); slices.ContainsFunc(bad, func(s string) bool { return strings.Contains(s, "fault=breaker") }) {
		t.Errorf("check of a breaker row above its floor: %q", bad)
	}
}

// TestPairedRatio: the floor is judged on the median of rep-by-rep
// ratios, so one slow rep of either row does not decide it.
func TestPairedRatio(t *testing.T) {
	for _, tc := range []struct {
		gp, base []float64
		want     float64
	}{
		{[]float64{80, 40, 90}, []float64{100, 50, 100}, 0.8},  // rep 2 slow in both rows
		{[]float64{80, 85}, []float64{100, 100}, 0.825},        // even count: the middle two
		{[]float64{80, 80, 80}, []float64{100, 0, 100}, 0.8},   // a rep with no baseline left out
		{[]float64{80}, nil, 0},                                // no baseline
		{[]float64{0, 80, 0}, []float64{100, 100, 100}, 0},     // goodput collapsed in two reps: 0, not left out
		{[]float64{10, 90, 95}, []float64{100, 100, 100}, 0.9}, // one slow rep of the row
	} {
		if got := median(pairRatios(tc.gp, tc.base)); got < tc.want-1e-9 || got > tc.want+1e-9 {
			t.Errorf("median(pairRatios(%v, %v)) = %v, want %v", tc.gp, tc.base, got, tc.want)
		}
	}
}

// TestFaultsStopNow: a stop mid-run that skips the drain (its context
// already ended) reports the pending sentences stopped, and the stop
// row's verification accounts for every emitted sentence: acked or
// stopped (the injected fails are replayed or stopped too), none twice,
// none acked unprocessed.
func TestFaultsStopNow(t *testing.T) {
	const n = 20_000
	fc := faultCase{fault: "stop", fail: faultsStopFail, stop: true, stopNow: true}
	rep, err := runFaultRep(newWCCorpus(), fc, n, 1, false, 0)
	if err != nil || rep.err != nil {
		t.Fatalf("%v %v", err, rep.err)
	}
	if rep.stopped == 0 || rep.emitted < n/2 || rep.healthy+rep.stopped+int(rep.healthyDead+rep.poisonDead) != rep.emitted {
		t.Errorf("%d emitted: %d acked, %d stopped, %d dead", rep.emitted, rep.healthy, rep.stopped, rep.healthyDead+rep.poisonDead)
	}
	t.Logf("%d of %d emitted when Stop (no drain) returned after %v: %d acked, %d reported stopped", rep.emitted, n, rep.stop, rep.healthy, rep.stopped)
}
