package bench

import (
	"fmt"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/affinity"
	"github.com/xorack/xorack/perf"
)

// expireEvery is the batches between Expire calls at core level: with 256
// messages a batch, a shard loop ticking every millisecond at a few tens
// of millions of messages a second does about this (ackcore's benchmarks
// use the same).
const expireEvery = 64

// sampleEvery is the batches between latency samples at core level: one
// batch in 16 has its completions recorded, enough for a p99.9 and cheap
// enough (a few ns per recorded root) not to weigh on the fastest acker.
const sampleEvery = 16

// genBlock is the batches the fault generator rewrites at once, outside
// the timed calls, so that timing brackets many Apply calls, not one.
const genBlock = 16

// warmCap bounds the warm-up after the prefix (half a cycle, as ackcore's
// benchmarks do) so that slow baselines at large windows do not eat the
// run.
func (rn *runner) warmCap() time.Duration {
	if rn.cfg.Quick {
		return 50 * time.Millisecond
	}
	return 250 * time.Millisecond
}

// coreRun is one impl's state through a core-level run.
type coreRun struct {
	impl   coreImpl
	a      ackcore.Interface
	clk    benchClock
	cur    *cursor
	out    []ackcore.Outcome
	got    tally
	hist   *hdrhistogram.Histogram // nil: no latency to report
	batch  int
	faults bool          // fails or drops injected
	stream bool          // on a streamClock, timed in the acker's calls: a fault run or its twin
	stage  []ackcore.Msg // a twin's copy of its next block

	batches int
	reps    []float64
	msgs    int64
	ns      int64
	ctr     counterSum
	gc      gcSum

	maxPending int
	bytes      float64
	weighed    int
}

func (cr *coreRun) apply(msgs []ackcore.Msg, sample bool) {
	cr.out = cr.a.Apply(msgs, cr.out[:0])
	cr.clk.advance(len(msgs))
	cr.got.add(cr.out)
	if sample && cr.hist != nil {
		for i := range cr.out {
			if cr.out[i].Kind == ackcore.Completed {
				record(cr.hist, cr.out[i].Latency)
			}
		}
	}
	if cr.batches++; cr.batches%expireEvery == 0 {
		cr.expire()
	}
}

func (cr *coreRun) expire() {
	for {
		var more bool
		cr.out, more = cr.a.Expire(cr.out[:0])
		cr.got.add(cr.out)
		if !more {
			return
		}
	}
}

// core runs the core level for one stream on a goroutine of its own,
// pinned to one CPU and counted by perf, and returns a row per impl.
func (rn *runner) core(st *stream, p int) ([]Row, error) {
	var rows []Row
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		rows, err = rn.coreOn(st, p)
	}()
	<-done
	return rows, err
}

func (rn *runner) coreOn(st *stream, p int) ([]Row, error) {
	c := rn.cfg
	scope := "thread: the core runner"
	if !c.NoPin {
		// Pin where the scheduler put us: moving to a CPU chosen in
		// advance can land on one that another process keeps busy.
		if cpu, err := affinity.CurrentCPU(); err == nil {
			if unpin, err := affinity.Pin(cpu); err == nil {
				defer unpin()
				scope = "thread: the core runner, pinned to the CPU it started on"
			}
		}
	}
	g, err := perf.Open()
	if err != nil {
		g = nil
		scope = "none: " + err.Error()
	} else {
		defer g.Close()
	}

	timeout := rn.timeout(st)
	sh := st.shares(1)[0]
	// In a run with fails or drops each impl runs beside its fault-free
	// twin (faultFree), the two set up together and their reps taking
	// turns, the twin's just before the row's, so that a slow minute of
	// this shared machine slows a pair's two reps alike.
	sides := []*runner{rn}
	if c.faults() {
		sides = []*runner{rn.faultFree(), rn}
	}
	var runs []*coreRun // per impl, one per side in turn
	var of []*runner    // the side of each run
	for _, name := range c.impls[LevelCore] {
		impl, _ := findCore(name)
		for _, side := range sides {
			maxPending := st.MaxPending() + side.faultHeadroom(st, timeout, impl.evicts, impl.drains)
			what := name
			if side != rn {
				what += ", fault-free twin"
			}
			rn.progress(time.Duration(p)*costSetup, "core %s P=%d: %s setup", st.Shape.Name, p, what)
			cr, err := side.coreSetup(impl, st, sh, maxPending, timeout)
			if err != nil {
				return nil, err
			}
			runs, of = append(runs, cr), append(of, side)
		}
	}
	perMsgs := c.Msgs / int64(c.Reps)
	perDur := c.Duration / time.Duration(c.Reps)
	n := len(sides)
	for rep := 0; rep < c.Reps; rep++ {
		for i := 0; i < len(runs); i += n {
			first := (i + rep*n) % len(runs) // rotate which impl goes first; a twin stays just before its row
			for _, cr := range runs[first : first+n] {
				rn.progress(rn.repCost(), "core %s P=%d: %s rep %d/%d", st.Shape.Name, p, cr.impl.name, rep+1, c.Reps)
				cr.rep(perMsgs, perDur, g)
			}
		}
	}
	var twins, rows []Row
	for i, cr := range runs {
		rn.progress(time.Duration(p)*costDrain, "core %s P=%d: %s drain and verify", st.Shape.Name, p, cr.impl.name)
		row := of[i].baseRow(LevelCore, cr.impl.name, st, p)
		cr.finish(&row, timeout)
		row.CounterScope = scope
		runs[i] = nil // let its memory go before the next one is weighed elsewhere
		if of[i] != rn {
			twins = append(twins, row)
			continue
		}
		if n == 2 {
			row.FaultFreeRatio = median(pairRatios(row.RepMsgsPerSec, twins[len(twins)-1].RepMsgsPerSec))
		}
		rows = append(rows, row)
	}
	return append(twins, rows...), nil
}

// coreSetup builds impl's acker, applies the prefix, warms it up and weighs
// it.
func (rn *runner) coreSetup(impl coreImpl, st *stream, sh *share, maxPending int, timeout time.Duration) (*coreRun, error) {
	c := rn.cfg
	cr := &coreRun{impl: impl, batch: c.Batch, faults: c.faults(), stream: rn.streamTime(), maxPending: maxPending,
		out: make([]ackcore.Outcome, 0, max(c.Batch, 1024))}
	var fg *faultGen
	if cr.faults {
		fg = c.faultGen(st.K)
	} else if impl.latency != "" && !cr.stream {
		cr.hist = newHist() // a latency in stream time is no latency: twins report none
	}
	cr.cur = newCursor(sh, fg, c.Batch*genBlock)
	spareThreads(8)
	before := int64(heapInUse())
	if cr.stream {
		cr.clk = &streamClock{}
	} else {
		cr.clk = &activeClock{}
	}
	a, err := impl.make(ackcore.Config{MaxPending: maxPending, Timeout: timeout, Clock: cr.clk})
	if err != nil {
		return nil, fmt.Errorf("bench: core %s: %w", impl.name, err)
	}
	cr.a = a
	cr.clk.resume()
	cr.cur.prefix(c.Batch, func(m []ackcore.Msg, _ []meta) { cr.apply(m, false) })
	t0 := time.Now()
	for n := 0; n < len(sh.cycle)/2; {
		msgs, _ := cr.cur.next(c.Batch, false)
		cr.apply(msgs, false)
		n += len(msgs)
		if cr.batches%sampleEvery == 0 && time.Since(t0) > rn.warmCap() {
			break
		}
	}
	cr.clk.pause()
	cr.weighed = a.Stats().Pending
	cr.bytes = float64(max(int64(heapInUse())-before, 0)) / float64(max(cr.weighed, 1))
	return cr, nil
}

// rep runs one measured repetition: msgs messages, or for d when msgs is 0.
func (cr *coreRun) rep(msgs int64, d time.Duration, g *perf.Group) {
	cr.clk.resume()
	gc0 := readGC()
	var s0 perf.Sample
	if g != nil {
		s0, _ = g.Read()
	}
	var n, ns int64
	if !cr.stream {
		if g != nil {
			g.Start()
		}
		t0 := time.Now()
		for i := 0; ; i++ {
			want := cr.batch
			if msgs > 0 {
				want = int(min(int64(want), msgs-n))
			}
			batch, _ := cr.cur.next(want, false)
			cr.apply(batch, i%sampleEvery == 0)
			n += int64(len(batch))
			if msgs > 0 && n >= msgs || msgs == 0 && i%sampleEvery == sampleEvery-1 && time.Since(t0) >= d {
				break
			}
		}
		ns = int64(time.Since(t0))
	} else {
		for {
			want := cr.batch * genBlock
			if msgs > 0 {
				want = int(min(int64(want), msgs-n))
			}
			block, _ := cr.cur.next(want, false) // rewritten outside the timed calls
			if cr.cur.fs == nil {
				// A twin's block is copied as a fault row's is rewritten,
				// outside the timed calls, so that both apply from memory
				// just written.
				cr.stage = append(cr.stage[:0], block...)
				block = cr.stage
			}
			if g != nil {
				g.Start()
			}
			t0 := time.Now()
			for i := 0; i < len(block); i += cr.batch {
				cr.apply(block[i:min(i+cr.batch, len(block))], false)
			}
			ns += int64(time.Since(t0))
			if g != nil {
				g.Stop()
			}
			n += int64(len(block))
			if msgs > 0 && n >= msgs || msgs == 0 && time.Duration(ns) >= d {
				break
			}
		}
	}
	if g != nil {
		g.Stop()
		if s1, err := g.Read(); err == nil {
			cr.ctr.add(s1.Sub(s0))
		}
	}
	cr.gc.add(gc0, readGC())
	cr.clk.pause()
	cr.msgs += n
	cr.ns += ns
	cr.reps = append(cr.reps, float64(n)/time.Duration(ns).Seconds())
}

// finish runs to a round boundary, drains every tree in flight, lets what
// must time out time out, verifies, and fills row.
func (cr *coreRun) finish(row *Row, timeout time.Duration) {
	cr.clk.resume()
	for !cr.cur.atRound() {
		msgs, _ := cr.cur.next(cr.batch, true)
		cr.apply(msgs, false)
	}
	exp := expectation{roots: cr.cur.roots(), injFail: cr.cur.injFail, injDrop: cr.cur.injDrop}
	cr.cur.drain(cr.batch, func(m []ackcore.Msg, _ []meta) { cr.apply(m, false) })
	if cr.faults {
		cr.clk.Skip(4*timeout + time.Second) // past every deadline, and Storm's third rotation
	}
	cr.expire()
	cr.clk.pause()
	st := cr.a.Stats()
	chk := check{exp: exp, got: cr.got, pendingLeft: st.Pending, checkPending: true}
	if cr.impl.exact {
		chk.stats = &st
	}
	if s, ok := cr.a.(interface{ DroppedInit() uint64 }); ok {
		chk.silentTimeouts = s.DroppedInit()
	}
	err := verify(chk)

	row.Msgs, row.Seconds = cr.msgs, time.Duration(cr.ns).Seconds()
	row.RepMsgsPerSec = cr.reps
	row.MsgsPerSec = median(cr.reps)
	row.TreesPerSec = row.MsgsPerSec / float64(cr.cur.sh.k)
	row.Timing = "wall"
	if cr.stream {
		row.Timing = "acker-calls"
	}
	row.BytesPerRoot, row.PendingWeighed, row.MaxPending = cr.bytes, cr.weighed, cr.maxPending
	lat := summarize(cr.hist)
	row.P50Ns, row.P99Ns, row.P999Ns, row.MaxNs, row.LatencyCount = lat.p50, lat.p99, lat.p999, lat.max, lat.count
	switch {
	case cr.hist != nil:
		row.LatencySource = cr.impl.latency + fmt.Sprintf("; 1 batch in %d sampled", sampleEvery)
	case cr.stream:
		row.LatencySource = "n/a: fault runs and their twins use a stream clock at core level"
	default:
		row.LatencySource = "n/a: this impl reports no latency"
	}
	row.GCCycles, row.GCPauseNs = cr.gc.cycles, cr.gc.pauseNs
	row.CountersPerMsg = cr.ctr.perMsg(cr.msgs)
	row.TimeoutNs, row.Clock = int64(timeout), cr.clk.kind()
	row.Roots, row.InjectedFail, row.InjectedDrop = exp.roots, exp.injFail, exp.injDrop
	row.Completed, row.FailedExplicit = cr.got.completed(), cr.got.explicit()
	row.FailedTimeout = cr.got.timedOut() + chk.silentTimeouts
	row.OrphansEvicted, row.OrphansDrained, row.FailsDropped = st.OrphansEvicted, st.OrphansDrained, st.FailsDropped
	row.Verified = err == nil
	if err != nil {
		row.VerifyError = detail(err)
	}
	cr.a = nil
}
