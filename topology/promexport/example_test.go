package promexport_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xorack/xorack/topology"
	"github.com/xorack/xorack/topology/promexport"
)

// numbers emits 0..n-1, each tracked by its value, then is done.
type numbers struct{ next, n int }

func (s *numbers) Next(c *topology.SpoutCollector) {
	if s.next == s.n {
		c.Done()
		return
	}
	_ = c.Emit(s.next, s.next)
	s.next++
}
func (s *numbers) Ack(any)                     {}
func (s *numbers) Fail(any, *topology.Failure) {}

// Register a topology's collector once it is built, as a service does at
// startup, run it (5 numbers acked by a bolt), and scrape the registry.
func ExampleNew() {
	b := topology.NewBuilder()
	b.Spout("numbers", func() topology.Spout { return &numbers{n: 5} }).Output("n")
	b.Bolt("sink", func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(*topology.Tuple, *topology.BasicCollector) error { return nil }))
	}).Input("numbers", topology.Shuffle())
	top, err := b.Build(topology.Config{})
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(promexport.New(top)) // it reads the topology at each scrape

	if err := top.Start(); err != nil {
		panic(err)
	}
	<-top.Done() // every number completed
	if err := top.Stop(context.Background()); err != nil {
		panic(err)
	}
	mfs, err := reg.Gather() // what a /metrics handler serves
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		switch name := mf.GetName(); name {
		case "xorack_topology_roots_completed_total", "xorack_topology_tuples_acked_total":
			m := mf.GetMetric()[0]
			fmt.Printf("%s{component=%q} %v\n", name, m.GetLabel()[0].GetValue(), m.GetCounter().GetValue())
		case "xorack_topology_complete_latency_seconds":
			fmt.Printf("%s_count %d\n", name, mf.GetMetric()[0].GetHistogram().GetSampleCount())
		}
	}
	// Output:
	// xorack_topology_complete_latency_seconds_count 5
	// xorack_topology_roots_completed_total{component="numbers"} 5
	// xorack_topology_tuples_acked_total{component="sink"} 5
}

// snapshot is a Source that returns fixed metrics, as a test or another
// engine reporting topology.Metrics might.
type snapshot topology.Metrics

func (s snapshot) Metrics() topology.Metrics { return topology.Metrics(s) }

// Export any Source, here a fixed snapshot, and check a scrape with testutil.
func ExampleSource() {
	src := snapshot{Components: []topology.ComponentMetrics{
		{Name: "reader", Spout: true, Completed: 40, FailedTimeout: 2, Pending: 3},
	}}
	c := promexport.New(src)
	err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP xorack_topology_roots_pending Roots pending: in flight, waiting for a replay, or held by the breaker.
# TYPE xorack_topology_roots_pending gauge
xorack_topology_roots_pending{component="reader"} 3
`), "xorack_topology_roots_pending")
	fmt.Println("pending as expected:", err == nil)
	fmt.Println("failed-root series, one per reason:", testutil.CollectAndCount(c, "xorack_topology_roots_failed_total"))
	// Output:
	// pending as expected: true
	// failed-root series, one per reason: 6
}
