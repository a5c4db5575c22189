package bench

// The pipeline level's runner: each impl's pipe built, its producers
// (pipeproducer.go) driven through the phases of a run, rows measured.

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/bench/internal/pipeline"
)

// pipeline runs the pipeline level for one stream: each impl in turn. In
// a run with fails or drops each row runs beside its fault-free twin,
// both pipes built, their peak reps taking turns (turns): rep k of the
// twin, then rep k of the row; the row's FaultFreeRatio is the median of
// the reps' paired ratios, so a slow minute of this shared machine slows
// a pair's two reps alike. The twins are listed first.
func (rn *runner) pipeline(st *stream, p int) ([]Row, error) {
	c := rn.cfg
	if len(c.impls[LevelPipeline]) == 0 {
		return nil, nil
	}
	shares := st.shares(c.Producers)
	var twins, rows []Row
	for _, name := range c.impls[LevelPipeline] {
		impl, _ := findPipe(name)
		rn.progress(rn.rowCost(p), "pipeline %s P=%d: %s", st.Shape.Name, p, name)
		if !c.faults() {
			row, err := rn.pipeRow(impl, st, shares, p, rn.timeout(st))
			if err != nil {
				return rows, err
			}
			rows = append(rows, row)
			continue
		}
		rn.progress(rn.rowCost(p), "pipeline %s P=%d: %s, fault-free twin", st.Shape.Name, p, name)
		t := newTurns()
		twin := rn.faultFree()
		twin.turns, twin.side = t, 0
		fault := *rn
		fault.turns, fault.side = t, 1
		var base Row
		var baseErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			base, baseErr = twin.pipeRow(impl, st, shares, p, twin.timeout(st))
		}()
		row, err := fault.pipeRow(impl, st, shares, p, fault.timeout(st))
		<-done
		if err = errors.Join(baseErr, err); err != nil {
			return append(twins, rows...), err
		}
		row.FaultFreeRatio = median(pairRatios(row.RepMsgsPerSec, base.RepMsgsPerSec))
		twins, rows = append(twins, base), append(rows, row)
	}
	return append(twins, rows...), nil
}

// turns alternates two pipeline rows, a fault row and its fault-free twin
// (pipeline), on one machine: one side runs at a time, and they hand over
// before each peak rep and after the last, so that rep k of the row and
// rep k of its twin run one after the other while the idle pipe waits.
// A nil *turns is one side alone. The side holding the turn is the only
// one to call its methods.
type turns struct {
	ch   [2]chan struct{} // holds the turn's token for side i
	done [2]atomic.Bool
}

func newTurns() *turns {
	t := &turns{ch: [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}}
	t.ch[0] <- struct{}{} // the twin builds its pipe first
	return t
}

// take waits for side's turn.
func (t *turns) take(side int) {
	if t != nil {
		<-t.ch[side]
	}
}

// give hands the turn to the other side, or back to side's own once the
// other has finished.
func (t *turns) give(side int) {
	if t == nil {
		return
	}
	if t.done[1-side].Load() {
		t.ch[side] <- struct{}{}
	} else {
		t.ch[1-side] <- struct{}{}
	}
}

// pass lets the other side run once, then takes the turn back.
func (t *turns) pass(side int) {
	t.give(side)
	t.take(side)
}

// finish ends side's row: the other runs on alone.
func (t *turns) finish(side int) {
	if t != nil {
		t.done[side].Store(true)
		t.give(side)
	}
}

// pipeTimer is what a pipeline row's peak reps are bracketed with in a Go
// benchmark: its *testing.B.
type pipeTimer interface {
	StartTimer()
	StopTimer()
}

// benchPipeline runs one pipeline row as a Go benchmark does
// (BenchmarkAcker): the impl cfg.Impls[0] with cfg's Producers, Shards and
// Msgs, in one rep, on st (window p) split into shares (st.shares of
// cfg.Producers). It is pipeRow with t's timer running during the peak
// rep alone and no latency run; the row is verified as every pipeline
// row is. With twin, cfg must have fails or drops, and the row is its
// fault-free twin (runner.faultFree: the same clock, timeout and bound).
func benchPipeline(cfg Config, st *stream, shares []*share, p int, t pipeTimer, twin bool) (Row, error) {
	cfg.Levels, cfg.Reps = []Level{LevelPipeline}, 1
	r, err := cfg.prepare()
	if err != nil {
		return Row{}, err
	}
	if len(r.Impls) != 1 || len(shares) != r.Producers {
		return Row{}, fmt.Errorf("bench: benchPipeline wants one impl and %d shares, got %q and %d", r.Producers, r.Impls, len(shares))
	}
	if twin && !r.faults() {
		return Row{}, errors.New("bench: benchPipeline: a twin of a run without fails or drops")
	}
	impl, _ := findPipe(r.Impls[0])
	rn := &runner{cfg: r, rep: &Report{}, timer: t, peakOnly: true}
	if twin {
		rn = rn.faultFree()
	}
	return rn.pipeRow(impl, st, shares, p, rn.timeout(st))
}

func (rn *runner) pipeRow(impl pipeImpl, st *stream, shares []*share, p int, timeout time.Duration) (Row, error) {
	rn.turns.take(rn.side) // with a twin (pipeline): its turn and this one's alternate
	defer rn.turns.finish(rn.side)
	c := rn.cfg
	row := rn.baseRow(LevelPipeline, impl.name, st, p)
	var clk benchClock
	if rn.streamTime() {
		clk = &streamClock{}
	} else {
		clk = newWallClock()
	}
	// Every slot may be mid-tree at once (the shares' phases need not be
	// spread evenly), so the bound is the slots, spread over the shards
	// with 5% for the hash's unevenness, and 256 more where 5% of a small
	// window is only a few roots.
	maxPending := (st.Slots+rn.faultHeadroom(st, timeout, true, true))*105/100/row.Shards + 256 // every pipe's orphans give way
	base := time.Now()
	prods := make([]*producer, c.Producers)
	for i := range prods {
		prods[i] = &producer{id: i, cur: newCursor(shares[i], c.faultGen(st.K), c.Batch), clk: clk, batch: c.Batch, k: st.K,
			warm: rn.warmCap(), base: base, cmds: make(chan command), res: make(chan result, 1),
			out: make([]ackcore.Outcome, 0, 1024), hist: newHist()}
	}
	before := int64(heapInUse())
	pp, err := impl.make(pipeline.Config{Producers: c.Producers, Tasks: c.Producers, Shards: row.Shards, MaxPending: maxPending,
		Timeout: timeout, Clock: clk, Batch: c.Batch, Pin: !c.NoPin})
	if err != nil {
		return row, fmt.Errorf("bench: pipeline %s: %w", impl.name, err)
	}
	if err := pp.Start(); err != nil {
		return row, fmt.Errorf("bench: pipeline %s: %w", impl.name, err)
	}
	for _, pr := range prods {
		pr.s = sender{pp.Sender(pr.id), pp.Inbox(pr.id)}
		pr.task, pr.batched = uint32(pr.id), c.netSend
		if t, ok := pp.(spoutTasker); ok {
			pr.task = t.SpoutTask(pr.id)
		}
		go pr.loop()
	}
	var runErr error
	// do sends cmd to every producer; with d > 0 it stops them after d.
	// It returns the messages sent and the time taken.
	do := func(cmd command, d time.Duration) (int64, time.Duration) {
		t0 := time.Now()
		for _, pr := range prods {
			pr.stop.Store(false)
			pr.cmds <- cmd
		}
		if d > 0 {
			time.Sleep(d)
			for _, pr := range prods {
				pr.stop.Store(true)
			}
		}
		var sent int64
		for _, pr := range prods {
			r := <-pr.res
			sent += r.sent
			if r.err != nil && runErr == nil {
				runErr = fmt.Errorf("producer %d: %w", pr.id, r.err)
			}
		}
		return sent, time.Since(t0)
	}

	do(command{ph: phWarm}, 0)
	time.Sleep(3 * ackcore.DefaultTick) // executors publish counters once a tick
	row.PendingWeighed = pp.Stats().Pending
	row.BytesPerRoot = float64(max(int64(heapInUse())-before, 0)) / float64(max(row.PendingWeighed, 1))
	row.MaxPending = maxPending

	var gc gcSum
	var cpu time.Duration // over the peak reps alone (a twin's run between them)
	var perMsgs int64     // per producer and repetition; 0: run for perDur
	if c.Msgs > 0 {
		perMsgs = max(c.Msgs/int64(c.Reps)/int64(c.Producers), 1)
	}
	perDur := c.Duration / time.Duration(c.Reps)
	for rep := 0; rep < c.Reps && runErr == nil; rep++ {
		rn.turns.pass(rn.side) // the twin's rep, if any, then this one
		if rn.timer != nil {
			rn.timer.StartTimer()
		}
		gc0, cpu0 := readGC(), processCPU()
		n, d := do(command{ph: phPeak, msgs: perMsgs}, perDur)
		cpu += processCPU() - cpu0
		gc.add(gc0, readGC())
		if rn.timer != nil {
			rn.timer.StopTimer()
		}
		row.Msgs += n
		row.Seconds += d.Seconds()
		row.RepMsgsPerSec = append(row.RepMsgsPerSec, float64(n)/d.Seconds())
	}
	rn.turns.pass(rn.side)
	row.MsgsPerSec = median(row.RepMsgsPerSec)
	row.TreesPerSec = row.MsgsPerSec / float64(st.K)
	row.Timing = "wall"

	// Latency at a fraction of the peak.
	if runErr == nil && row.MsgsPerSec > 0 && !rn.peakOnly {
		rate := row.MsgsPerSec * c.LatencyLoad
		row.LatencyRate = rate
		gc1 := readGC()
		do(command{ph: phLatency, rate: rate / float64(c.Producers), msgs: perMsgs}, perDur)
		gc.add(gc1, readGC())
	}
	hist := newHist()
	for _, pr := range prods {
		hist.Merge(pr.hist)
	}
	lat := summarize(hist)
	row.P50Ns, row.P99Ns, row.P999Ns, row.MaxNs, row.LatencyCount = lat.p50, lat.p99, lat.p999, lat.max, lat.count
	row.LatencySource = fmt.Sprintf("wall clock: last ACK handed to the pipe to its Completed polled by the producer, offered %.0f%% of peak", 100*c.LatencyLoad)
	if impl.name == "mutexmap" {
		row.LatencySource = fmt.Sprintf("wall clock: last ACK staged to its Completed polled by the producer (Apply runs in the producer's flush), offered %.0f%% of peak", 100*c.LatencyLoad)
	}
	if rn.peakOnly {
		row.LatencySource = "none: no latency run (benchPipeline)"
	}

	// Drain, then let the injected drops time out.
	do(command{ph: phDrain}, 0)
	if c.faults() {
		clk.Skip(4*timeout + time.Second)
		do(command{ph: phTimeouts}, 0)
	}
	final := pp.Stop()
	for _, pr := range prods {
		close(pr.cmds)
	}

	var got tally
	var exp expectation
	for _, pr := range prods {
		got.merge(&pr.got)
		exp.roots += pr.exp.roots
		exp.injFail += pr.exp.injFail
		exp.injDrop += pr.exp.injDrop
	}
	err = verify(check{exp: exp, got: got, stats: &final})
	if runErr != nil {
		err = &verifyError{runErr.Error()}
	}
	row.GCCycles, row.GCPauseNs = gc.cycles, gc.pauseNs
	row.CountersPerMsg = (&counterSum{}).perMsg(0)
	if cpu >= 0 && row.Msgs > 0 {
		x := float64(cpu) / float64(row.Msgs)
		row.CountersPerMsg["task-clock-ns"] = &x
	}
	row.CounterScope = "process: CPU time of every thread (getrusage) over the peak runs; per-thread counters are taken at core level"
	row.TimeoutNs, row.Clock = int64(timeout), clk.kind()
	row.Roots, row.InjectedFail, row.InjectedDrop = exp.roots, exp.injFail, exp.injDrop
	row.Completed, row.FailedExplicit, row.FailedTimeout = got.completed(), got.explicit(), got.timedOut()
	row.OrphansEvicted, row.OrphansDrained, row.FailsDropped = final.OrphansEvicted, final.OrphansDrained, final.FailsDropped
	row.Verified = err == nil
	if err != nil {
		row.VerifyError = detail(err)
	}
	return row, nil
}
