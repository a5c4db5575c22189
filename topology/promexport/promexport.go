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
// reason, ackcore.Reason's String (reason="lost"). One more,
// xorack_topology_build_info, is 1 with the build's version, revision and
// Go version as labels. Counters end in _total; pending, the pending bound and the
// breaker's state are gauges; the complete latency is a histogram in
// seconds with the buckets of LatencyBuckets (the execute latency,
// ExecuteBuckets), folded from the engine's HDR
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

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/buildinfo"
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
	build buildinfo.Info
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
	{"acker_errors_total", "Messages the acker refused because it had stopped.", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.AckerErrors) }, false, false},
	{"timeouts_held_total", "Traced roots that timed out with an unacked tuple at, or on its way to, one of the component's tasks (about one in Config.TraceEvery of its timeouts).", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.TimeoutsHeld) }, false, false},
	{"busy_seconds_total", "Time executing batches of inputs, measured per batch; its rate over the executors is the capacity.", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return c.Busy.Seconds() }, false, true},
	{"executors", "Executors (goroutines) running the component.", prometheus.GaugeValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.Executors) }, false, false},
	{"outcomes_stale_total", "Outcomes for roots that were not pending (none expected).", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.Stale) }, true, false},
	{"messages_failed_final_total", "Fail callbacks: dead-lettered, given up at shutdown, or a redelivering source's failed attempts.", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.FailedFinal) }, true, false},
	{"roots_pending_high", "The most roots one task had pending at once.", prometheus.GaugeValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.PendingHigh) }, true, false},
	{"roots_pending", "Roots pending: in flight, waiting for a replay, or held by the breaker.", prometheus.GaugeValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.Pending) }, true, false},
	{"roots_waiting", "Of the roots pending, those waiting out a replay's backoff (the pending bound counts the others).", prometheus.GaugeValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.Waiting) }, true, false},
	{"roots_held", "Of the roots pending, new messages the retry-storm breaker holds (emitted, not started).", prometheus.GaugeValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.Held) }, true, false},
	{"breaker_held_seconds_total", "Time the retry-storm breaker was open or half open, summed over executors.", prometheus.CounterValue,
		func(c *topology.ComponentMetrics) float64 { return c.BreakerHeld.Seconds() }, true, false},
	{"pending_bound", "The pending bound per task, summed over executors.", prometheus.GaugeValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.Bound) }, true, false},
	{"breaker_open", "Executors whose breaker is open or probing.", prometheus.GaugeValue,
		func(c *topology.ComponentMetrics) float64 { return float64(c.BreakerOpen) }, true, false},
}

var reasons = []ackcore.Reason{ackcore.ReasonExplicit, ackcore.ReasonTimeout, ackcore.ReasonFull, ackcore.ReasonStopped, ackcore.ReasonLost, ackcore.ReasonPanic}

// ExecuteBuckets are the execute-latency histogram's upper bounds in
// seconds: 1 µs to 10 s, about three per decade.
var ExecuteBuckets = []float64{
	1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005,
	0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10,
}

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
	c.descs["execute_latency_seconds"] = prometheus.NewDesc(prometheus.BuildFQName(ns, "", "execute_latency_seconds"),
		"Execute time of one Execute in 64, timed on the engine clock.", []string{"component"}, nil)
	c.descs["build_info"] = prometheus.NewDesc(prometheus.BuildFQName(ns, "", "build_info"),
		"The xorack build the engine runs: its module version and VCS revision, and the Go version (always 1).",
		[]string{"version", "revision", "goversion"}, nil)
	c.build = buildinfo.Read()
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
	ch <- prometheus.MustNewConstMetric(c.descs["build_info"], prometheus.GaugeValue, 1,
		c.build.Version, c.build.Revision, c.build.GoVersion)
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
			if h := cm.ExecuteLatency; h != nil {
				ch <- histogram(c.descs["execute_latency_seconds"], h, time.Nanosecond, ExecuteBuckets, cm.Name)
			}
			continue
		}
		for _, r := range reasons {
			ch <- prometheus.MustNewConstMetric(c.descs["roots_failed_total"], prometheus.CounterValue,
				float64(cm.FailedWith(r)), cm.Name, r.String())
		}
		if h := cm.Latency; h != nil {
			ch <- histogram(c.descs["complete_latency_seconds"], h, time.Microsecond, LatencyBuckets, cm.Name)
		}
	}
}

// histogram folds an HDR histogram whose values are in unit into a
// Prometheus histogram in seconds with the given upper bounds.
func histogram(d *prometheus.Desc, h *hdrhistogram.Histogram, unit time.Duration, bounds []float64, label string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(bounds))
	for _, bar := range h.Distribution() {
		if bar.Count == 0 {
			continue
		}
		// A bar's values are at most bar.To units; it counts in every
		// bucket at or above that.
		up := float64(bar.To) * unit.Seconds()
		for _, b := range bounds {
			if up <= b {
				buckets[b] += uint64(bar.Count)
			}
		}
	}
	n := uint64(h.TotalCount())
	sum := h.Mean() * float64(n) * unit.Seconds()
	return prometheus.MustNewConstHistogram(d, n, sum, buckets, label)
}

var _ prometheus.Collector = (*Collector)(nil)
