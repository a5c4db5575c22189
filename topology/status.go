package topology

import (
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// statusRefresh is how often the status page reloads itself (a meta
// refresh: no script), and so the interval its rates are taken over.
const statusRefresh = 2 * time.Second

// oldestScan is how many of the acker's oldest pending roots the status
// page asks for to find each spout's oldest (a diagnostic scan of the
// acker's table, once per page load).
const oldestScan = 64

// StatusHandler returns the topology's admin page: an HTTP handler
// serving, at any path, a small HTML page with a row per component —
// executed/s, execute latency p50 and p99, capacity (the busy fraction of
// its executors), emitted, acked, failed by reason, pending, oldest
// pending and timeouts held — read from Metrics at each load. Rates and
// capacity are taken over the time since the previous load (the first
// load: since StatusHandler was called) on the engine clock. Mount it
// where an operator can reach it:
//
//	http.Handle("/topology/", http.StripPrefix("/topology", top.StatusHandler()))
func (t *Topology) StatusHandler() http.Handler {
	return &statusPage{top: t, prevAt: t.cfg.Clock.Now()}
}

type statusPage struct {
	top    *Topology
	mu     sync.Mutex // guards prev and prevAt
	prev   Metrics
	prevAt time.Duration
}

// statusRow is one component's row, every cell formatted.
type statusRow struct {
	Name, Kind                                  string
	ExecutedPerSec, P50, P99, Capacity          string
	Emitted, Acked, Failed, Pending, Oldest     string
	TimeoutsHeld, Executors, Tasks, CompleteP99 string
}

type statusData struct {
	Refresh  int
	Interval string
	Rows     []statusRow
}

func (p *statusPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := p.top.Metrics()
	now := p.top.cfg.Clock.Now()
	oldest := p.top.oldestBySpout()
	p.mu.Lock()
	prev, dt := p.prev, now-p.prevAt
	p.prev, p.prevAt = m, now
	p.mu.Unlock()
	d := statusData{Refresh: int(statusRefresh / time.Second), Interval: fmtDuration(dt)}
	for i := range m.Components {
		d.Rows = append(d.Rows, statusRowOf(&m.Components[i], prev.Component(m.Components[i].Name), dt, oldest))
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := statusTemplate.Execute(w, d); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// statusRowOf formats one component's row; prev is its metrics at the
// previous load (nil: none), dt the time since.
func statusRowOf(c, prev *ComponentMetrics, dt time.Duration, oldest map[string]time.Duration) statusRow {
	var p ComponentMetrics
	if prev != nil {
		p = *prev
	}
	row := statusRow{Name: c.Name, Kind: "bolt", Executors: fmt.Sprint(c.Executors), Tasks: fmt.Sprint(c.Tasks),
		Emitted: fmtCount(c.Emitted), TimeoutsHeld: fmtCount(c.TimeoutsHeld),
		ExecutedPerSec: "-", P50: "-", P99: "-", Capacity: "-", Acked: "-", Pending: "-", Oldest: "-", CompleteP99: "-"}
	if c.Spout {
		row.Kind = "spout"
		row.Acked = fmtCount(c.Completed)
		row.Failed = failedByReason(c)
		row.Pending = fmt.Sprint(c.Pending)
		if age, ok := oldest[c.Name]; ok {
			row.Oldest = fmtDuration(age)
		}
		if c.Latency != nil && c.Latency.TotalCount() > 0 {
			row.CompleteP99 = fmtDuration(time.Duration(c.Latency.ValueAtQuantile(99)) * time.Microsecond)
		}
		return row
	}
	row.Acked, row.Failed = fmtCount(c.Acked), fmtCount(c.Failed)
	if dt > 0 {
		row.ExecutedPerSec = fmt.Sprintf("%.0f", float64(c.Executed-p.Executed)/dt.Seconds())
		row.Capacity = fmt.Sprintf("%.1f%%", capacity(c.Busy-p.Busy, dt, c.Executors))
	}
	if h := c.ExecuteLatency; h != nil && h.TotalCount() > 0 {
		row.P50 = fmtDuration(time.Duration(h.ValueAtQuantile(50)))
		row.P99 = fmtDuration(time.Duration(h.ValueAtQuantile(99)))
	}
	return row
}

// capacity is the percentage of the interval dt its executors were
// busy. Busy is measured per batch, so it can pass 100% only by the part
// of a batch that began before the interval (its time is published when
// it ends): the figure is capped at 100%.
func capacity(busy, dt time.Duration, executors int) float64 {
	return min(100*float64(busy)/float64(dt)/float64(max(executors, 1)), 100)
}

// failedByReason lists a spout's failed attempts by reason, "0" for none.
func failedByReason(c *ComponentMetrics) string {
	var parts []string
	for _, r := range failReasons {
		if n := c.FailedWith(r); n > 0 {
			parts = append(parts, fmt.Sprintf("%v %d", r, n))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}

// oldestBySpout returns, per spout component, the age of its oldest root
// pending at the acker, when the acker can say (the in-process one and a
// netio client can).
func (t *Topology) oldestBySpout() map[string]time.Duration {
	t.mu.Lock()
	port := t.port
	t.mu.Unlock()
	op, ok := port.(interface {
		OldestPending(n int) []ackcore.PendingRoot
	})
	if !ok {
		return nil
	}
	out := map[string]time.Duration{}
	for _, pr := range op.OldestPending(oldestScan) {
		if int(pr.Task) >= len(t.spoutOf) {
			continue // no INIT seen yet (NoTask)
		}
		name := t.spoutOf[pr.Task].comp.name
		if _, ok := out[name]; !ok {
			out[name] = pr.Age // oldest first
		}
	}
	return out
}

// fmtCount prints a counter as a plain decimal.
func fmtCount(n uint64) string { return strconv.FormatUint(n, 10) }

// fmtDuration prints a duration with three significant digits in the unit
// that suits it: 850 ns, 12.3 µs, 1.50 ms, 29.8 s.
func fmtDuration(d time.Duration) string {
	f := float64(d)
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%d ns", d)
	case d < time.Millisecond:
		return sig3(f/1e3) + " µs"
	case d < time.Second:
		return sig3(f/1e6) + " ms"
	}
	return sig3(f/1e9) + " s"
}

func sig3(x float64) string {
	switch {
	case x < 10:
		return fmt.Sprintf("%.2f", x)
	case x < 100:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.0f", x)
}

// statusTemplate is the page: plain HTML, a meta refresh, each cell
// tagged data-k="component:column" for tests and scrapers.
var statusTemplate = template.Must(template.New("status").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{{.Refresh}}">
<title>xorack topology</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em}
table{border-collapse:collapse}
th,td{padding:.3em .7em;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child{text-align:left}
th{background:#f4f4f4}
</style></head><body>
<h1>Topology</h1>
<p>Rates and capacity over the last {{.Interval}}; reloads every {{.Refresh}} s.</p>
<table>
<tr><th>component</th><th>kind</th><th>executors</th><th>tasks</th><th>executed/s</th><th>execute p50</th><th>execute p99</th><th>capacity</th><th>emitted</th><th>acked</th><th>failed</th><th>pending</th><th>oldest pending</th><th>complete p99</th><th>timeouts held</th></tr>
{{range .Rows}}<tr>
<td data-k="{{.Name}}:name">{{.Name}}</td><td data-k="{{.Name}}:kind">{{.Kind}}</td><td data-k="{{.Name}}:executors">{{.Executors}}</td><td data-k="{{.Name}}:tasks">{{.Tasks}}</td><td data-k="{{.Name}}:executed_per_sec">{{.ExecutedPerSec}}</td><td data-k="{{.Name}}:execute_p50">{{.P50}}</td><td data-k="{{.Name}}:execute_p99">{{.P99}}</td><td data-k="{{.Name}}:capacity">{{.Capacity}}</td><td data-k="{{.Name}}:emitted">{{.Emitted}}</td><td data-k="{{.Name}}:acked">{{.Acked}}</td><td data-k="{{.Name}}:failed">{{.Failed}}</td><td data-k="{{.Name}}:pending">{{.Pending}}</td><td data-k="{{.Name}}:oldest_pending">{{.Oldest}}</td><td data-k="{{.Name}}:complete_p99">{{.CompleteP99}}</td><td data-k="{{.Name}}:timeouts_held">{{.TimeoutsHeld}}</td>
</tr>
{{end}}</table>
<p>Spouts: acked is completed roots, failed is failed attempts by reason. Capacity is the time executing inputs over the interval, per executor (at most 100%).</p>
</body></html>
`))
