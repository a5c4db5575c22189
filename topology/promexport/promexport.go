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
// Go version as labels (internal/buildinfo's, as ackerd's ackerd_build_info). Counters end in _total; pending, the pending bound and the
// breaker's state are gauges; the complete latency is a histogram in
// seconds, 100 µs to a minute, about three buckets per decade (the execute
// latency: 1 µs to 10 s), folded from the engine's HDR
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
	"fmt"
	"reflect"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/buildinfo"
	"github.com/xorack/xorack/internal/numfield"
	"github.com/xorack/xorack/topology"
)

// Source is what the collector reads; *topology.Topology is one.
type Source interface {
	Metrics() topology.Metrics
}

// latencyBuckets are the complete-latency histogram's upper bounds in
// seconds: 100 µs to a minute, about three per decade. Fixed: a scrape
// carries them (the le labels), and a caller changing them mid-run would
// race with Collect.
var latencyBuckets = []float64{
	0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
	0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60,
}

// Collector is a prometheus.Collector for one topology.
type Collector struct {
	src   Source
	descs map[string]*prometheus.Desc
	build []string // the build-info series' label values (buildinfo.Info.Labels)
}

// metricTable lists the series every component has, or only bolts or
// only spouts, one a line: the name (after xorack_topology_), the
// topology.ComponentMetrics field it reads, which components have it
// (all, bolts or spouts) and the help. A name ending in _total is a
// counter, any other a gauge; a time.Duration field is read in seconds.
const metricTable = `
tuples_emitted_total         Emitted      all    Emit calls (spouts: first attempts and untracked emits).
tuples_transferred_total     Transferred  all    Tuples sent to tasks, one per destination task.
tuples_dropped_total         Dropped      all    Tuples lost in transit (fault injection) or dropped at shutdown.
tuples_executed_total        Executed     bolts  Execute calls.
tuples_acked_total           Acked        bolts  Input tuples acked.
tuples_failed_total          Failed       bolts  Input tuples failed.
late_acks_total              LateAcks     bolts  Acks of tuples whose root had already failed, timed out or stopped.
resets_total                 Resets       bolts  RESETs sent.
resets_capped_total          ResetsCapped bolts  RESETs refused: the root had reached its reset cap.
panics_total                 Panics       all    Panics recovered from the component's code.
roots_completed_total        Completed    spouts Roots fully processed.
roots_replayed_total         Replayed     spouts Replays emitted (each a fresh root).
messages_dead_lettered_total DeadLettered spouts Messages that failed their last attempt.
breaker_opens_total          BreakerOpens spouts Times the retry-storm breaker opened.
acker_errors_total           AckerErrors  all    Messages the acker refused because it had stopped.
timeouts_held_total          TimeoutsHeld all    Traced roots that timed out with an unacked tuple at, or on its way to, one of the component's tasks (about one in Config.TraceEvery of its timeouts).
busy_seconds_total           Busy         bolts  Time executing batches of inputs, measured per batch; its rate over the executors is the capacity.
executors                    Executors    all    Executors (goroutines) running the component.
outcomes_stale_total         Stale        spouts Outcomes for roots that were not pending (none expected).
messages_failed_final_total  FailedFinal  spouts Fail callbacks: dead-lettered, given up at shutdown, or a redelivering source's failed attempts.
roots_pending_high           PendingHigh  spouts The most roots one task had pending at once.
roots_pending                Pending      spouts Roots pending: in flight, waiting for a replay, or held by the breaker.
roots_waiting                Waiting      spouts Of the roots pending, those waiting out a replay's backoff (the pending bound counts the others).
roots_held                   Held         spouts Of the roots pending, new messages the retry-storm breaker holds (emitted, not started).
breaker_held_seconds_total   BreakerHeld  spouts Time the retry-storm breaker was open or half open, summed over executors.
pending_bound                Bound        spouts The pending bound per task, summed over executors.
breaker_open                 BreakerOpen  spouts Executors whose breaker is open or probing.
`

// metric is a line of metricTable, read.
type metric struct {
	name, help  string
	kind        prometheus.ValueType
	field       []int // the field's index in topology.ComponentMetrics
	spout, bolt bool  // spouts only, bolts only
}

var metrics = readMetrics(metricTable)

// readMetrics reads table (metricTable). A line it cannot read, or a field
// that is not a number of topology.ComponentMetrics, panics: the table is
// the package's own, and any of its tests reads it.
func readMetrics(table string) []metric {
	var out []metric
	for _, line := range strings.Split(strings.TrimSpace(table), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			panic(fmt.Sprintf("promexport: metric line %q: want name, field, scope and help", line))
		}
		index, err := numfield.Find(reflect.TypeFor[topology.ComponentMetrics](), f[1])
		if err != nil {
			panic(fmt.Sprintf("promexport: metric %s: %v", f[0], err))
		}
		m := metric{name: f[0], help: strings.Join(f[3:], " "), kind: prometheus.GaugeValue, field: index,
			spout: f[2] == "spouts", bolt: f[2] == "bolts"}
		if strings.HasSuffix(m.name, "_total") {
			m.kind = prometheus.CounterValue
		}
		if !m.spout && !m.bolt && f[2] != "all" {
			panic(fmt.Sprintf("promexport: metric %s: scope %q, want all, bolts or spouts", f[0], f[2]))
		}
		out = append(out, m)
	}
	return out
}

// value reads m's field of c: a count, or a duration in seconds.
func (m *metric) value(c *topology.ComponentMetrics) float64 {
	return numfield.Float(reflect.ValueOf(c).Elem(), m.field)
}

var reasons = []ackcore.Reason{ackcore.ReasonExplicit, ackcore.ReasonTimeout, ackcore.ReasonFull, ackcore.ReasonStopped, ackcore.ReasonLost, ackcore.ReasonPanic}

// executeBuckets are the execute-latency histogram's upper bounds in
// seconds: 1 µs to 10 s, about three per decade.
var executeBuckets = []float64{
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
		buildinfo.LabelNames(), nil)
	c.build = buildinfo.Read().Labels()
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
	ch <- prometheus.MustNewConstMetric(c.descs["build_info"], prometheus.GaugeValue, 1, c.build...)
	m := c.src.Metrics()
	for i := range m.Components {
		cm := &m.Components[i]
		for i := range metrics {
			mt := &metrics[i]
			if mt.spout && !cm.Spout || mt.bolt && cm.Spout {
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.descs[mt.name], mt.kind, mt.value(cm), cm.Name)
		}
		if !cm.Spout {
			if h := cm.ExecuteLatency; h != nil {
				ch <- histogram(c.descs["execute_latency_seconds"], h, time.Nanosecond, executeBuckets, cm.Name)
			}
			continue
		}
		for _, r := range reasons {
			ch <- prometheus.MustNewConstMetric(c.descs["roots_failed_total"], prometheus.CounterValue,
				float64(cm.FailedWith(r)), cm.Name, r.String())
		}
		if h := cm.Latency; h != nil {
			ch <- histogram(c.descs["complete_latency_seconds"], h, time.Microsecond, latencyBuckets, cm.Name)
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
