package bench

import (
	"testing"
	"time"
)

// TestProgressPlan: the run reports exactly the steps its plan counted,
// and their estimated work adds up to the plan's total, so an ETA from
// Done/Total ends at 100%, not before or after.
func TestProgressPlan(t *testing.T) {
	var evs []Progress
	cfg := Config{Levels: []Level{LevelCore, LevelPipeline}, Impls: []string{"xorack"}, Pending: []int{300, 3000},
		Msgs: 6000, Reps: 2, NoPin: true, Quick: true, Progress: func(p Progress) { evs = append(evs, p) }}
	if _, err := Run(cfg); err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 || evs[0].Steps != len(evs) {
		t.Fatalf("%d events, the plan said %d", len(evs), evs[0].Steps)
	}
	var done time.Duration
	for i, e := range evs {
		if e.Step != i || e.Done != done || e.Weight <= 0 || e.Total != evs[0].Total {
			t.Fatalf("event %d: %+v (done so far %v)", i, e, done)
		}
		done += e.Weight
	}
	if done != evs[0].Total {
		t.Errorf("the steps' work adds to %v, the plan's total is %v", done, evs[0].Total)
	}
}

// TestProgressModelP1M: in the default run, the windows below P=1M are a
// third of the estimated work (measured: 0.35 of the time), not the two
// thirds of the steps an ETA from steps assumed.
func TestProgressModelP1M(t *testing.T) {
	r, err := Config{}.prepare()
	if err != nil {
		t.Fatal(err)
	}
	rn := &runner{cfg: r}
	steps, total := rn.plan()
	r.Pending = r.Pending[:len(r.Pending)-1] // the windows before 1M
	stepsBefore, before := rn.plan()
	if frac := float64(before) / float64(total); frac < 0.25 || frac > 0.45 {
		t.Errorf("the windows below 1M are %.2f of the estimated work, want about 0.35", frac)
	}
	if frac := float64(stepsBefore) / float64(steps); frac < 0.6 {
		t.Errorf("the windows below 1M are %.2f of the steps: the test no longer shows the difference", frac)
	}
}
