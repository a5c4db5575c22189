package promexport_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xorack/xorack/topology"
	"github.com/xorack/xorack/topology/promexport"
)

func TestCollector(t *testing.T) {
	const n = 500
	b := topology.NewBuilder()
	b.Spout("numbers", func() topology.Spout { return &numbers{n: n} }).Output("n")
	b.Bolt("odd", func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, c *topology.BasicCollector) error { return nil }))
	}).Input("numbers", topology.Shuffle())
	top, err := b.Build(topology.DefaultConfig())
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
xorack_topology_roots_failed_total{component="numbers",reason="acker lost"} 0
xorack_topology_roots_failed_total{component="numbers",reason="explicit"} 0
xorack_topology_roots_failed_total{component="numbers",reason="panic"} 0
xorack_topology_roots_failed_total{component="numbers",reason="rejected"} 0
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
