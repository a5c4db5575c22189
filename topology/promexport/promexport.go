// Package promexport exports a topology's metrics (package topology) to
// Prometheus: a prometheus.Collector that reads Topology.Metrics at each
// scrape. It lives apart so that the engine itself does not import the
// Prometheus client.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(promexport.New(top))
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// # Layout
//
// Every series is labelled with the component; failed roots also with the
// reason. Counters end in _total; pending, the pending bound and the
// breaker's state are gauges; the complete latency is a histogram in
// seconds with the buckets of LatencyBuckets, folded from the engine's HDR
// histogram at scrape time (its sum is the HDR mean times the count, so
// exact to the histogram's 3 significant digits).
//
// # Concurrency
//
// Collect may run on any goroutine, concurrently with the topology:
// Topology.Metrics is safe for that.
//
// # Invariants
//
// A scrape reports what Metrics returned, with nothing kept between
// scrapes: counters only grow because the engine's do.
package promexport

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xorack/xorack/topology"
)

// Source is what the collector reads; *topology.Topology is one.
type Source interface {
	Metrics() topology.Metrics
}

// LatencyBuckets are the complete-latency histogram's upper bounds in
// seconds: 100 µs to a minute, about three per decade.
var LatencyBuckets = []float64{
	0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
	0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60,
}

// Collector is a prometheus.Collector for one topology.
type Collector struct {
	src   Source
	descs map[string]*prometheus.Desc
}

type metric struct {
	name, help string
	kind       prometheus.ValueType
	value      func(c *topology.ComponentMetrics) float64
	spout      bool // spouts only
	bolt       bool // bolts only
}

var metrics = []metric{
	{"tuples_emitted_total", "Emit calls (spouts: first attempts and untracked emits).", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.Emitted) }, false, false},
	{"tuples_transferred_total", "Tuples sent to tasks, one per destination task.", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.Transferred) }, false, false},
	{"tuples_dropped_total", "Tuples lost in transit (fault injection) or dropped at shutdown.", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.Dropped) }, false, false},
	{"tuples_executed_total", "Execute calls.", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.Executed) }, false, true},
	{"tuples_acked_total", "Input tuples acked.", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.Acked) }, false, true},
	{"tuples_failed_total", "Input tuples failed.", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.Failed) }, false, true},
	{"late_acks_total", "Acks of tuples whose root had already failed, timed out or stopped.", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.LateAcks) }, false, true},
	{"resets_total", "RESETs sent.", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.Resets) }, false, true},
	{"resets_capped_total", "RESETs refused: the root had reached its reset cap.", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.ResetsCapped) }, false, true},
	{"panics_total", "Panics recovered from the component's code.", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.Panics) }, false, false},
	{"roots_completed_total", "Roots fully processed.", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.Completed) }, true, false},
	{"roots_replayed_total", "Replays emitted (each a fresh root).", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.Replayed) }, true, false},
	{"messages_dead_lettered_total", "Messages that failed their last attempt.", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.DeadLettered) }, true, false},
	{"breaker_opens_total", "Times the retry-storm breaker opened.", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.BreakerOpens) }, true, false},
	{"roots_pending", "Roots pending, in flight or waiting for a replay.", prometheus.GaugeValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.Pending) }, true, false},
	{"pending_bound", "The pending bound per task, summed over executors.", prometheus.GaugeValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.Bound) }, true, false},
	{"breaker_open", "Executors whose breaker is open or probing.", prometheus.GaugeValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.BreakerOpen) }, true, false},
}

var reasons = []topology.Reason{topology.Explicit, topology.Timeout, topology.AckerLost, topology.Rejected, topology.Stopped, topology.Panic}

const ns = "xorack_topology"

// New returns a collector reading src at each scrape.
func New(src Source) *Collector {
	c := &Collector{src: src, descs: map[string]*prometheus.Desc{}}
	for _, m := range metrics {
		c.descs[m.name] = prometheus.NewDesc(prometheus.BuildFQName(ns, "", m.name), m.help, []string{"component"}, nil)
	}
	c.descs["roots_failed_total"] = prometheus.NewDesc(prometheus.BuildFQName(ns, "", "roots_failed_total"),
		"Failed attempts, by reason.", []string{"component", "reason"}, nil)
	c.descs["complete_latency_seconds"] = prometheus.NewDesc(prometheus.BuildFQName(ns, "", "complete_latency_seconds"),
		"Complete latency of completed roots, emit to completion, per attempt.", []string{"component"}, nil)
	return c
}

// Describe sends every descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect reads the topology's metrics and sends them.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	m := c.src.Metrics()
	for i := range m.Components {
		cm := &m.Components[i]
		for _, mt := range metrics {
			if mt.spout && !cm.Spout || mt.bolt && cm.Spout {
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.descs[mt.name], mt.kind, mt.value(cm), cm.Name)
		}
		if !cm.Spout {
			continue
		}
		for _, r := range reasons {
			ch <- prometheus.MustNewConstMetric(c.descs["roots_failed_total"], prometheus.CounterValue,
				float64(cm.FailedWith(r)), cm.Name, r.String())
		}
		if h := cm.Latency; h != nil {
			buckets := make(map[float64]uint64, len(LatencyBuckets))
			for _, bar := range h.Distribution() {
				if bar.Count == 0 {
					continue
				}
				// A bar's values are at most bar.To µs; it counts in every
				// bucket at or above that.
				up := float64(bar.To) * float64(time.Microsecond) / float64(time.Second)
				for _, b := range LatencyBuckets {
					if up <= b {
						buckets[b] += uint64(bar.Count)
					}
				}
			}
			n := uint64(h.TotalCount())
			sum := h.Mean() * float64(n) * float64(time.Microsecond) / float64(time.Second)
			ch <- prometheus.MustNewConstHistogram(c.descs["complete_latency_seconds"], n, sum, buckets, cm.Name)
		}
	}
}

var _ prometheus.Collector = (*Collector)(nil)
