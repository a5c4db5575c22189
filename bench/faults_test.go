package bench

import (
	"strings"
	"testing"
)

// TestFaultsLevel runs the fault matrix small: one row per fault, every
// sentence ended once, no healthy sentence dead-lettered, the poison
// dead-lettered, replays where failures were injected.
func TestFaultsLevel(t *testing.T) {
	rep, err := Run(Config{Levels: []Level{LevelFaults}, Msgs: 4000, Reps: 1, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
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
		injected := cases[i].fail > 0 || cases[i].drop > 0 || cases[i].poison > 0
		if !cases[i].slow && injected != (fs.Replays > 0) {
			t.Errorf("row %s: %d replays", r.Name(), fs.Replays)
		}
		if cases[i].poison > 0 && fs.PoisonDead == 0 {
			t.Errorf("row %s: no poison dead-lettered", r.Name())
		}
	}
	var sb strings.Builder
	if err := WriteTable(&sb, rep); err != nil || !strings.Contains(sb.String(), "faults: fail") {
		t.Errorf("table: %v\n%s", err, sb.String())
	}
}
