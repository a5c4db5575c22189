package promexport

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/xorack/xorack/internal/numfield"
	"github.com/xorack/xorack/topology"
)

// TestEveryNumberExported: each number of topology.ComponentMetrics is a
// series of the table, but for those exported another way (the failed
// attempts by reason, in roots_failed_total) or not at all (Tasks, fixed
// by the topology's build); a counter added to the engine without a
// series fails here.
func TestEveryNumberExported(t *testing.T) {
	elsewhere := []string{"Tasks", "FailedExplicit", "FailedTimeout", "FailedFull", "FailedStopped", "FailedLost", "FailedPanic"}
	read := map[string]bool{}
	for _, m := range metrics {
		read[reflect.TypeFor[topology.ComponentMetrics]().FieldByIndex(m.field).Name] = true
	}
	cm := reflect.TypeFor[topology.ComponentMetrics]()
	for i := range cm.NumField() {
		f := cm.Field(i)
		if _, err := numfield.Find(cm, f.Name); err == nil && !read[f.Name] && !slices.Contains(elsewhere, f.Name) {
			t.Errorf("ComponentMetrics.%s is in no series", f.Name)
		}
	}
}

// TestMetricValue: a count reads as itself, a duration in seconds, and a
// line that names no number of ComponentMetrics, or no scope, panics.
func TestMetricValue(t *testing.T) {
	ms := readMetrics("a_total Emitted all A.\nb_seconds_total Busy bolts B.\nc Pending spouts C c.")
	c := &topology.ComponentMetrics{Emitted: 7, Busy: 1500 * time.Millisecond, Pending: 3}
	for i, want := range []float64{7, 1.5, 3} {
		if got := ms[i].value(c); got != want {
			t.Errorf("%s = %v, want %v", ms[i].name, got, want)
		}
	}
	if ms[2].help != "C c." || ms[2].bolt || !ms[2].spout || ms[0].kind == ms[2].kind {
		t.Errorf("read %+v", ms[2])
	}
	for _, bad := range []string{"x Name all X.", "x Nope all X.", "x Emitted both X.", "x Emitted all"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("line %q read without a panic", bad)
				}
			}()
			readMetrics(bad)
		}()
	}
}
