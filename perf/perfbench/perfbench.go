package perfbench

import (
	"sync"
	"testing"

	"github.com/xorack/xorack/perf"
)

// Reporter is the part of *testing.B that Report uses.
type Reporter interface {
	ReportMetric(n float64, unit string)
}

// Report reports each known event in delta divided by ops as "<unit>/op",
// for example "cycles/op" or "task-clock-ns/op", and skips unknown ones. With
// events given it reports only those. It reports nothing if ops <= 0.
func Report(r Reporter, delta perf.Sample, ops int, events ...perf.Event) {
	report := func(e perf.Event) {
		if x, ok := delta.Get(e).PerOp(ops); ok {
			r.ReportMetric(x, e.Unit()+"/op")
		}
	}
	if len(events) == 0 {
		for e := range perf.NumEvents {
			report(e)
		}
		return
	}
	for _, e := range events {
		report(e)
	}
}

// logged holds the notes already logged, so that each is logged once per
// process rather than once per benchmark round.
var logged sync.Map

func logOnce(b *testing.B, note string) {
	b.Helper()
	if _, dup := logged.LoadOrStore(note, true); !dup {
		b.Logf("perfbench: %s", note)
	}
}

// Start opens a perf.Group on the benchmark goroutine's thread, counting the
// given events (all by default), and starts it. Call it after setup,
// immediately before the measured loop.
//
// stop stops the counters, reports each known event per b.N operation
// through Report, and closes the Group. Call it right after the loop; b.N
// then holds the iteration count, with b.Loop as with a b.N loop. It runs
// at b.Cleanup too if not called, and only the first call does anything.
//
// When the machine cannot count everything, or anything, Start logs
// perf.Probe's note once per process and reports what it can.
func Start(b *testing.B, events ...perf.Event) (stop func()) {
	st := perf.Probe()
	if st.Err != nil {
		logOnce(b, st.Note())
	}
	g, err := perf.Open(events...)
	if err != nil {
		logOnce(b, err.Error())
		return func() {}
	}
	before, err := g.Read()
	if err != nil {
		g.Close()
		logOnce(b, err.Error())
		return func() {}
	}
	done := false
	stop = func() {
		if done {
			return
		}
		done = true
		g.Stop()
		after, err := g.Read()
		g.Close()
		if err != nil {
			b.Errorf("perfbench: %v", err)
			return
		}
		Report(b, after.Sub(before), b.N, events...)
	}
	b.Cleanup(stop)
	g.Start()
	return stop
}
