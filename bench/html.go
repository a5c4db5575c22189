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
)

// WriteHTML writes rep as one self-contained HTML page: the machine and
// configuration, the table, and SVG charts drawn by gonum/plot
// (throughput against the pending window per impl, and latency
// percentiles), inline so that the file needs nothing else.
func WriteHTML(w io.Writer, rep *Report) error {
	var charts []chart
	for _, g := range groups(rep.Rows) {
		svg, err := throughputChart(g)
		if err != nil {
			return err
		}
		charts = append(charts, chart{Title: fmt.Sprintf("%s, %s: throughput vs pending window", g.level, g.shape), SVG: svg})
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
	return pageTmpl.Execute(w, page{
		Title: "ackbench report", Machine: rep.Machine.Summary, Go: rep.Machine.GoVersion,
		Perf: rep.PerfNote, Stalls: stalls, Config: describe(rep.Config), Started: rep.Started.Format("2006-01-02 15:04:05 MST"),
		Table: table.String(), Charts: charts, Failed: Check(rep, CheckFloor),
	})
}

type chart struct {
	Title string
	SVG   template.HTML
}

type page struct {
	Title, Machine, Go, Perf, Stalls, Config, Started, Table string
	Charts                                                   []chart
	Failed                                                   []string
}

var pageTmpl = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 80em; }
pre { font-size: 12px; background: #f6f6f6; padding: 1em; overflow-x: auto; }
figure { display: inline-block; margin: 0.5em; vertical-align: top; }
figcaption { font-weight: bold; margin-bottom: 0.3em; }
.check { color: #a00; }
</style></head><body>
<h1>{{.Title}}</h1>
<p>Started {{.Started}}.<br>Machine: {{.Machine}}<br>Go: {{.Go}}<br>Counters: {{.Perf}}<br>Stalls: {{.Stalls}}<br>Configuration: {{.Config}}</p>
{{if .Failed}}<h2>Gate (-check)</h2><ul class="check">{{range .Failed}}<li>{{.}}</li>{{end}}</ul>{{end}}
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
	impls   []string
	pending []int
	rows    []*Row
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
		if !slices.Contains(g.impls, r.Impl) {
			g.impls = append(g.impls, r.Impl)
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
	p.Legend.Top = true
	for i, impl := range g.impls {
		var xys plotter.XYs
		for _, r := range g.rows {
			if r.Impl == impl && r.MsgsPerSec > 0 {
				xys = append(xys, plotter.XY{X: float64(r.Pending), Y: r.MsgsPerSec})
			}
		}
		if len(xys) == 0 {
			continue
		}
		if err := addLine(p, i, impl, xys); err != nil {
			return "", err
		}
	}
	padLog(&p.Y)
	return render(p)
}

// latencyChart plots p50, p99, p99.9 and max for each impl at window pw;
// ok is false when no impl there reports latency.
func latencyChart(g *group, pw int) (_ template.HTML, ok bool, _ error) {
	p := plot.New()
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{label: func(x float64) string { v := int64(x); return dur(&v) }}
	p.X.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 1, Label: "p50"}, {Value: 2, Label: "p99"}, {Value: 3, Label: "p99.9"}, {Value: 4, Label: "max"}})
	p.Legend.Top, p.Legend.Left = true, true
	for i, impl := range g.impls {
		for _, r := range g.rows {
			if r.Impl != impl || r.Pending != pw || r.P50Ns == nil {
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
			if err := addLine(p, i, impl, xys); err != nil {
				return "", false, err
			}
			ok = true
		}
	}
	if !ok {
		return "", false, nil
	}
	padLog(&p.Y)
	svg, err := render(p)
	return svg, true, err
}

func addLine(p *plot.Plot, i int, name string, xys plotter.XYs) error {
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("bench: chart %s: %w", name, err)
	}
	l.Color, s.Color = plotutil.Color(i), plotutil.Color(i)
	l.Dashes = plotutil.Dashes(i)
	s.Shape = plotutil.Shape(i)
	p.Add(l, s)
	p.Legend.Add(name, l, s)
	return nil
}

// padLog widens a log axis by a factor of 1.5 each way: with one value, or
// equal ones, its range would otherwise be empty or reach 0, which a log
// scale cannot show.
func padLog(a *plot.Axis) {
	a.Min, a.Max = a.Min/1.5, a.Max*1.5
}

// render draws p as an SVG element (the XML prolog removed, so that it can
// sit inline in HTML).
func render(p *plot.Plot) (template.HTML, error) {
	wt, err := p.WriterTo(chartW, chartH, "svg")
	if err != nil {
		return "", fmt.Errorf("bench: chart: %w", err)
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
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
