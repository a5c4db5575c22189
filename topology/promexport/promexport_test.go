package promexport_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xorack/xorack/internal/buildinfo"
	"github.com/xorack/xorack/topology"
	"github.com/xorack/xorack/topology/promexport"
)

// runNumbers runs n numbers through a bolt that acks them, to the end.
func runNumbers(t *testing.T, n int) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder()
	b.Spout("numbers", func() topology.Spout { return &numbers{n: n} }).Output("n")
	b.Bolt("odd", func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, c *topology.BasicCollector) error { return nil }))
	}).Input("numbers", topology.Shuffle())
	top, err := b.Build(topology.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := top.Start(); err != nil {
		t.Fatal(err)
	}
	<-top.Done()
	if err := top.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	return top
}

func TestCollector(t *testing.T) {
	const n = 500
	top := runNumbers(t, n)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promexport.New(top))
	want := `
# HELP xorack_topology_roots_completed_total Roots fully processed.
# TYPE xorack_topology_roots_completed_total counter
xorack_topology_roots_completed_total{component="numbers"} 500
# HELP xorack_topology_tuples_acked_total Input tuples acked.
# TYPE xorack_topology_tuples_acked_total counter
xorack_topology_tuples_acked_total{component="odd"} 500
# HELP xorack_topology_roots_failed_total Failed attempts, by reason.
# TYPE xorack_topology_roots_failed_total counter
xorack_topology_roots_failed_total{component="numbers",reason="explicit"} 0
xorack_topology_roots_failed_total{component="numbers",reason="full"} 0
xorack_topology_roots_failed_total{component="numbers",reason="lost"} 0
xorack_topology_roots_failed_total{component="numbers",reason="panic"} 0
xorack_topology_roots_failed_total{component="numbers",reason="stopped"} 0
xorack_topology_roots_failed_total{component="numbers",reason="timeout"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"xorack_topology_roots_completed_total", "xorack_topology_tuples_acked_total", "xorack_topology_roots_failed_total"); err != nil {
		t.Error(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "xorack_topology_complete_latency_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != n {
				t.Errorf("latency histogram count %d, want %d", h.GetSampleCount(), n)
			}
			last := h.GetBucket()[len(h.GetBucket())-1]
			if last.GetCumulativeCount() != n {
				t.Errorf("the 60 s bucket counts %d, want all %d", last.GetCumulativeCount(), n)
			}
			return
		}
	}
	t.Error("no latency histogram")
}

// TestLintAndSeries: every series passes promlint, label values are
// snake_case, and the series beyond the first set are there with the
// engine's values.
func TestLintAndSeries(t *testing.T) {
	top := runNumbers(t, 300)
	c := promexport.New(top)
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	m := top.Metrics()
	want := map[string]float64{ // name{component} -> value
		"xorack_topology_acker_errors_total{numbers}":          float64(m.Component("numbers").AckerErrors),
		"xorack_topology_outcomes_stale_total{numbers}":        float64(m.Component("numbers").Stale),
		"xorack_topology_messages_failed_final_total{numbers}": float64(m.Component("numbers").FailedFinal),
		"xorack_topology_roots_pending_high{numbers}":          float64(m.Component("numbers").PendingHigh),
		"xorack_topology_timeouts_held_total{odd}":             0,
		"xorack_topology_busy_seconds_total{odd}":              m.Component("odd").Busy.Seconds(),
		"xorack_topology_executors{odd}":                       1,
	}
	if m.Component("numbers").PendingHigh < 1 {
		t.Errorf("PendingHigh %d: the test needs a value to see", m.Component("numbers").PendingHigh)
	}
	got := map[string]float64{}
	build := false
	execCount := uint64(0)
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			comp := ""
			for _, lp := range mt.GetLabel() {
				if v := lp.GetValue(); strings.ContainsAny(v, " -") || v != strings.ToLower(v) {
					t.Errorf("%s: label %s=%q is not snake_case", mf.GetName(), lp.GetName(), v)
				}
				if lp.GetName() == "component" {
					comp = lp.GetValue()
				}
			}
			switch {
			case mf.GetName() == "xorack_topology_build_info":
				labels := map[string]string{}
				for _, lp := range mt.GetLabel() {
					labels[lp.GetName()] = lp.GetValue()
				}
				want := buildinfo.Read().Labels()
				build = mt.GetGauge().GetValue() == 1 && len(labels) == len(want)
				for i, n := range buildinfo.LabelNames() {
					build = build && labels[n] == want[i]
				}
			case mf.GetName() == "xorack_topology_execute_latency_seconds":
				execCount = mt.GetHistogram().GetSampleCount()
			case mt.GetCounter() != nil:
				got[mf.GetName()+"{"+comp+"}"] = mt.GetCounter().GetValue()
			case mt.GetGauge() != nil:
				got[mf.GetName()+"{"+comp+"}"] = mt.GetGauge().GetValue()
			}
		}
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if !build {
		t.Errorf("no xorack_topology_build_info 1 with internal/buildinfo's labels %q and values %q", buildinfo.LabelNames(), buildinfo.Read().Labels())
	}
	if execCount != uint64(m.Component("odd").ExecuteLatency.TotalCount()) || execCount != 300/topology.ExecSampleEvery {
		t.Errorf("execute latency histogram counts %d, want one in %d of 300", execCount, topology.ExecSampleEvery)
	}
}
