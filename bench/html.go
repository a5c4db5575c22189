package bench

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// WriteHTML writes rep as one self-contained HTML page: the machine and
// configuration, the table, and SVG charts drawn by gonum/plot
// (throughput against the pending window per impl, and latency
// percentiles), inline so that the file needs nothing else.
func WriteHTML(w io.Writer, rep *Report) error {
	var charts []chart
	for _, g := range groups(rep.Rows) {
		if len(g.pending) == 1 {
			// One window (the topology, source, faults levels): a bar per
			// series, not a chart of single points.
			svg, err := barChart(g, "messages per second", func(r *Row) float64 { return r.MsgsPerSec })
			if err != nil {
				return err
			}
			charts = append(charts, chart{Title: fmt.Sprintf("%s, %s, P=%d: throughput", g.level, g.shape, g.pending[0]), SVG: svg})
		} else {
			svg, err := throughputChart(g)
			if err != nil {
				return err
			}
			charts = append(charts, chart{Title: fmt.Sprintf("%s, %s: throughput vs pending window", g.level, g.shape), SVG: svg})
		}
		if svg, ok, err := bytesChart(g); err != nil {
			return err
		} else if ok {
			charts = append(charts, chart{Title: fmt.Sprintf("%s, %s: bytes per pending root", g.level, g.shape), SVG: svg})
		}
		for _, p := range g.pending {
			svg, ok, err := latencyChart(g, p)
			if err != nil {
				return err
			}
			if ok {
				charts = append(charts, chart{Title: fmt.Sprintf("%s, %s, P=%d: completion latency", g.level, g.shape, p), SVG: svg})
			}
		}
	}
	var table bytes.Buffer
	if err := WriteTable(&table, rep); err != nil {
		return err
	}
	stalls := "not measured"
	if rep.Stalls.Threads > 0 {
		stalls = stallLine(rep.Stalls)
	}
	pg := page{
		Title: "ackbench report", Machine: rep.Machine.Summary, Go: rep.Machine.GoVersion,
		Perf: rep.PerfNote, Stalls: stalls, Config: describe(rep.Config), Started: rep.Started.Format("2006-01-02 15:04:05 MST"),
		Table: table.String(), Charts: charts, Gated: rep.CheckRatio > 0, CheckRatio: rep.CheckRatio,
	}
	if pg.Gated {
		pg.Failed = Check(rep, rep.CheckRatio)
	} else {
		for _, r := range rep.Rows {
			if !r.Verified {
				pg.Unverified = append(pg.Unverified, fmt.Sprintf("%s: %s", r.Name(), r.VerifyError))
			}
		}
	}
	return pageTmpl.Execute(w, pg)
}

type chart struct {
	Title string
	SVG   template.HTML
}

type page struct {
	Title, Machine, Go, Perf, Stalls, Config, Started, Table string
	Charts                                                   []chart
	// The gate's verdict, only when the run was gated (-check):
	// Failed lists what failed it. Unverified lists the rows that failed
	// their own verification, shown when there was no gate.
	Gated              bool
	CheckRatio         float64
	Failed, Unverified []string
}

var pageTmpl = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 80em; }
pre { font-size: 12px; background: #f6f6f6; padding: 1em; overflow-x: auto; }
figure { display: inline-block; margin: 0.5em; vertical-align: top; }
figcaption { font-weight: bold; margin-bottom: 0.3em; }
.check { color: #a00; }
.ok { color: #060; }
</style></head><body>
<h1>{{.Title}}</h1>
<p>Started {{.Started}}.<br>Machine: {{.Machine}}<br>Go: {{.Go}}<br>Counters: {{.Perf}}<br>Stalls: {{.Stalls}}<br>Configuration: {{.Config}}</p>
{{if .Gated}}{{if .Failed}}<h2>Gate (-check) failed</h2><ul class="check">{{range .Failed}}<li>{{.}}</li>{{end}}</ul>{{else}}<h2>Gate (-check) passed</h2><p class="ok">xorack core &ge; {{.CheckRatio}}x gomap at every window; every run verified.</p>{{end}}{{end}}
{{if .Unverified}}<h2>Verification failed</h2><ul class="check">{{range .Unverified}}<li>{{.}}</li>{{end}}</ul>{{end}}
<h2>Charts</h2>
{{range .Charts}}<figure><figcaption>{{.Title}}</figcaption>{{.SVG}}</figure>
{{end}}
<h2>Table</h2>
<pre>{{.Table}}</pre>
</body></html>
`))

// group is the rows of one level and shape, for one chart.
type group struct {
	level   Level
	shape   string
	impls   []string // series names (seriesOf), in row order
	pending []int
	rows    []*Row
}

// seriesOf names the chart series a row belongs to: its impl, and on the
// net level its connections and batch (one line per combination, each
// with its own legend entry).
func seriesOf(r *Row) string {
	if r.Conns > 0 || r.Batch > 0 {
		return fmt.Sprintf("%s conns=%d batch=%d", r.Impl, r.Conns, r.Batch)
	}
	return r.Impl
}

func groups(rows []Row) []*group {
	var gs []*group
	for i := range rows {
		r := &rows[i]
		var g *group
		for _, x := range gs {
			if x.level == r.Level && x.shape == r.Shape {
				g = x
			}
		}
		if g == nil {
			g = &group{level: r.Level, shape: r.Shape}
			gs = append(gs, g)
		}
		g.rows = append(g.rows, r)
		if !slices.Contains(g.impls, seriesOf(r)) {
			g.impls = append(g.impls, seriesOf(r))
		}
		if !slices.Contains(g.pending, r.Pending) {
			g.pending = append(g.pending, r.Pending)
		}
	}
	for _, g := range gs {
		slices.Sort(g.pending)
	}
	return gs
}

const chartW, chartH = 14 * vg.Centimeter, 9 * vg.Centimeter

func throughputChart(g *group) (template.HTML, error) {
	p := plot.New()
	p.X.Label.Text = "pending window P (roots)"
	p.Y.Label.Text = "messages per second"
	if len(g.pending) > 1 {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, logTicks{label: si}
	}
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{label: si}
	return seriesChart(p, g, func(r *Row) float64 { return r.MsgsPerSec }, true)
}

// seriesChart draws one line per series of g: value against the pending
// window, skipping rows where it is 0; on a log Y axis (padded) or a
// linear one from 0.
func seriesChart(p *plot.Plot, g *group, value func(*Row) float64, logY bool) (template.HTML, error) {
	leg := plot.NewLegend()
	for i, name := range g.impls {
		var xys plotter.XYs
		for _, r := range g.rows {
			if seriesOf(r) == name && value(r) > 0 {
				xys = append(xys, plotter.XY{X: float64(r.Pending), Y: value(r)})
			}
		}
		if len(xys) == 0 {
			continue
		}
		if err := addLine(p, &leg, i, name, xys); err != nil {
			return "", err
		}
	}
	if logY {
		padLog(&p.Y)
	} else {
		p.Y.Min, p.Y.Max = 0, p.Y.Max*1.2
	}
	return render(p, &leg)
}

// bytesChart plots the bytes per pending root of each series that reports
// them (the headline figure: xorack's shard at 34-36 B, the Go map acker
// at 60-80); ok is false when none does.
func bytesChart(g *group) (_ template.HTML, ok bool, _ error) {
	value := func(r *Row) float64 { return r.BytesPerRoot }
	for _, r := range g.rows {
		ok = ok || r.BytesPerRoot > 0
	}
	if !ok {
		return "", false, nil
	}
	if len(g.pending) == 1 {
		svg, err := barChart(g, "bytes per pending root", value)
		return svg, true, err
	}
	p := plot.New()
	p.X.Label.Text = "pending window P (roots)"
	p.Y.Label.Text = "bytes per pending root"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, logTicks{label: si}
	p.Y.Tick.Marker = linTicks{label: si}
	svg, err := seriesChart(p, g, value, false)
	return svg, true, err
}

// barChart draws one bar per series of g (whose rows share one pending
// window), of value, skipping series where it is 0.
func barChart(g *group, ylabel string, value func(*Row) float64) (template.HTML, error) {
	p := plot.New()
	p.Y.Label.Text = ylabel
	p.Y.Tick.Marker = linTicks{label: si}
	var names []string
	var vals plotter.Values
	for _, name := range g.impls {
		for _, r := range g.rows {
			if seriesOf(r) == name && value(r) > 0 {
				names, vals = append(names, name), append(vals, value(r))
				break
			}
		}
	}
	if len(vals) == 0 {
		return render(p, nil)
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(18))
	if err != nil {
		return "", fmt.Errorf("bench: chart: %w", err)
	}
	bars.Color = plotutil.Color(0)
	bars.LineStyle.Width = 0
	p.Add(bars)
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = math.Pi / 8
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	p.X.Min, p.X.Max = -0.5, float64(len(vals))-0.5
	p.Y.Min, p.Y.Max = 0, p.Y.Max*1.15
	return render(p, nil)
}

// linTicks marks a linear axis with gonum's default ticks, labelled with
// label.
type linTicks struct{ label func(float64) string }

func (lt linTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = lt.label(ts[i].Value)
		}
	}
	return ts
}

// latencyChart plots p50, p99, p99.9 and max for each impl at window pw;
// ok is false when no impl there reports latency.
func latencyChart(g *group, pw int) (_ template.HTML, ok bool, _ error) {
	p := plot.New()
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{label: func(x float64) string { v := int64(x); return dur(&v) }}
	p.X.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 1, Label: "p50"}, {Value: 2, Label: "p99"}, {Value: 3, Label: "p99.9"}, {Value: 4, Label: "max"}})
	leg := plot.NewLegend()
	for i, impl := range g.impls {
		for _, r := range g.rows {
			if seriesOf(r) != impl || r.Pending != pw || r.P50Ns == nil {
				continue
			}
			var xys plotter.XYs
			for j, v := range []*int64{r.P50Ns, r.P99Ns, r.P999Ns, r.MaxNs} {
				if v != nil && *v > 0 {
					xys = append(xys, plotter.XY{X: float64(j + 1), Y: float64(*v)})
				}
			}
			if len(xys) == 0 {
				continue
			}
			if err := addLine(p, &leg, i, impl, xys); err != nil {
				return "", false, err
			}
			ok = true
		}
	}
	if !ok {
		return "", false, nil
	}
	padLog(&p.Y)
	svg, err := render(p, &leg)
	return svg, true, err
}

func addLine(p *plot.Plot, leg *plot.Legend, i int, name string, xys plotter.XYs) error {
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("bench: chart %s: %w", name, err)
	}
	l.Color, s.Color = plotutil.Color(i), plotutil.Color(i)
	l.Dashes = plotutil.Dashes(i)
	s.Shape = plotutil.Shape(i)
	p.Add(l, s)
	leg.Add(name, l, s)
	return nil
}

// padLog widens a log axis by a factor of 1.5 each way: with one value, or
// equal ones, its range would otherwise be empty or reach 0, which a log
// scale cannot show.
func padLog(a *plot.Axis) {
	a.Min, a.Max = a.Min/1.5, a.Max*1.5
}

// legendW is the width kept right of a chart's data for its legend, so
// that the legend never covers a line: 6 cm holds "netio conns=4
// batch=256" at gonum's default legend font.
const legendW = 6 * vg.Centimeter

// render draws p as an SVG element (the XML prolog removed, so that it can
// sit inline in HTML), with leg (if any) in a column right of the data.
func render(p *plot.Plot, leg *plot.Legend) (template.HTML, error) {
	w := chartW
	if leg != nil {
		w += legendW
	}
	cv := vgsvg.New(w, chartH)
	dc := draw.New(cv)
	if leg != nil {
		p.Draw(draw.Crop(dc, 0, -legendW, 0, 0))
		leg.Top, leg.Left = true, true
		leg.Draw(draw.Crop(dc, chartW+vg.Centimeter/4, 0, 0, -vg.Centimeter/2))
	} else {
		p.Draw(dc)
	}
	var b bytes.Buffer
	if _, err := cv.WriteTo(&b); err != nil {
		return "", fmt.Errorf("bench: chart: %w", err)
	}
	s := b.String()
	if i := strings.Index(s, "<svg"); i > 0 {
		s = s[i:]
	}
	return template.HTML(s), nil // produced by gonum/plot from our own numbers and names
}

// logTicks marks a log axis at 1, 2 and 5 times each power of ten,
// labelling the powers of ten (and the others when the range spans less
// than two decades) with label.
type logTicks struct{ label func(float64) string }

func (lt logTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return nil
	}
	dense := hi/lo < 100
	var ts []plot.Tick
	for p := math.Pow(10, math.Floor(math.Log10(lo))); p <= hi; p *= 10 {
		for _, m := range []float64{1, 2, 5} {
			v := p * m
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || dense {
				t.Label = lt.label(v)
			}
			ts = append(ts, t)
		}
	}
	return ts
}
