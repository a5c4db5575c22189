package perfbench_test

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/xorack/xorack/perf"
	"github.com/xorack/xorack/perf/perfbench"
)

// metrics is a Reporter that keeps what it is given; a benchmark passes its *testing.B instead.
type metrics map[string]float64

func (m metrics) ReportMetric(n float64, unit string) { m[unit] = n }

// Report turns a measured phase into per-operation columns, leaving out any the machine cannot count.
func ExampleReport() {
	const ops = 1000
	events := []perf.Event{perf.TaskClock, perf.ContextSwitches, perf.PageFaults}

	// The zero Sample measured nothing, so Report reports nothing from it.
	// Work done by another goroutine is measured by a Group opened there.
	var delta perf.Sample
	if g, err := perf.Open(events...); err == nil {
		defer g.Close()
		before, err1 := g.Read()
		g.Start()
		var buf []byte
		for i := range ops {
			buf = strconv.AppendInt(buf[:0], int64(i), 10)
		}
		g.Stop()
		after, err2 := g.Read()
		if err := errors.Join(err1, err2); err != nil {
			fmt.Println(err)
			return
		}
		delta = after.Sub(before)
	}

	m := metrics{}
	perfbench.Report(m, delta, ops, events...)
	for _, e := range events {
		_, reported := m[e.Unit()+"/op"]
		fmt.Printf("%s/op reported exactly where available: %t\n", e.Unit(), reported == perf.Probe().Available(e))
	}
	// Output:
	// task-clock-ns/op reported exactly where available: true
	// context-switches/op reported exactly where available: true
	// page-faults/op reported exactly where available: true
}
