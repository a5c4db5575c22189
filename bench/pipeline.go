package bench

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/bench/internal/pipeline"
)

// sender is one producer's handle on a pipeline: its Sender, and the Inbox
// of its spout task (producer p is task p and polls its own outcomes, as a
// Storm spout executor does). Not safe for concurrent use.
type sender struct {
	acker.Sender
	in acker.Inbox
}

// poll appends the outcomes of this producer's roots that have arrived,
// without waiting.
func (s sender) poll(dst []ackcore.Outcome) []ackcore.Outcome { return s.in.Poll(dst) }

// drainWait bounds how long producers wait for outcomes at the end of a
// pipeline run; an acker that loses outcomes fails verification after it.
// A variable so that tests can shorten it.
var drainWait = 10 * time.Second

// latencyQuantum is the messages a throttled producer sends between clock
// checks, flushing after each so that nothing waits in a half-filled span:
// at half of a 20 M msgs/s peak, 64 messages take 6 µs, fine pacing for
// one clock read and one publish per quantum.
const latencyQuantum = 64

// latencySettle bounds the wait after a latency run for its last roots,
// once the run has timed at least one; latencySettleEmpty bounds it while
// none is timed yet (a short run on a busy machine may end with every
// root it sent still in flight, and a row without samples).
const (
	latencySettle      = 50 * time.Millisecond
	latencySettleEmpty = 5 * time.Second
)

// phase is what the runner asks producers to do next.
type phase int

const (
	phWarm     phase = iota // prefix, then warm-up
	phPeak                  // send as fast as the pipe takes
	phLatency               // send at a set rate, timing completions
	phDrain                 // to a round boundary, finish every tree, wait for its outcome
	phTimeouts              // after the clock skipped: wait for the timeouts
)

type command struct {
	ph   phase
	msgs int64   // per producer; 0: until stop
	rate float64 // phLatency: messages a second, this producer
}

type result struct {
	sent int64
	err  error
}

// producer is one producer goroutine's state. Fields are owned by that
// goroutine while a command runs; the runner reads them only after the
// reply (the channel orders the accesses).
type producer struct {
	id   int
	task uint32 // the spout task its INITs name (see spoutTasker)
	s    sender
	// batched: hand each batch over with SendBatch then Flush (the net
	// level), instead of Send per message with the pipe's own publishing
	batched bool
	scratch []ackcore.Msg
	cur     *cursor
	clk     benchClock
	batch   int
	k       int
	warm    time.Duration
	base    time.Time

	stop atomic.Bool // set by the runner to end a timed phase
	cmds chan command
	res  chan result

	got  tally
	out  []ackcore.Outcome
	hist *hdrhistogram.Histogram
	lat  map[uint64]time.Duration // root -> when its last ACK was sent
	exp  expectation
}

func (pr *producer) loop() {
	for cmd := range pr.cmds {
		var r result
		switch cmd.ph {
		case phWarm:
			r = pr.warmUp()
		case phPeak:
			r = pr.peak(cmd.msgs)
		case phLatency:
			r = pr.throttled(cmd.msgs, cmd.rate)
		case phDrain:
			r = pr.drain()
		case phTimeouts:
			r = pr.waitFor(func() bool { return pr.got.completed()+pr.got.failed() >= pr.exp.roots })
		}
		pr.res <- r
	}
}

// sendAll sends msgs, naming this producer as their spout task: one
// message at a time, or (batched) all at once and flushed.
func (pr *producer) sendAll(msgs []ackcore.Msg) error {
	if pr.batched {
		pr.scratch = append(pr.scratch[:0], msgs...)
		for i := range pr.scratch {
			if pr.scratch[i].Kind == ackcore.Init {
				pr.scratch[i].Task = pr.task
			}
		}
		if err := pr.s.SendBatch(pr.scratch); err != nil {
			return err
		}
		if err := pr.s.Flush(); err != nil {
			return err
		}
		pr.clk.advance(len(msgs))
		return nil
	}
	for _, m := range msgs {
		if m.Kind == ackcore.Init {
			m.Task = pr.task
		}
		if err := pr.s.Send(m); err != nil {
			return err
		}
	}
	pr.clk.advance(len(msgs))
	return nil
}

// sendNext sends the cursor's next up to n messages and returns how many
// it sent: straight from the share's memory, one Send each, with only a
// faulted tree's messages rewritten on their way (cursor.span), so that
// fault mode costs the producer no copy of its batch, and a message left
// alone one byte's test (its act). Batched producers hand over a copy
// (sendAll).
func (pr *producer) sendNext(n int) (int, error) {
	if pr.batched || pr.cur.fs == nil {
		msgs, _ := pr.cur.next(n, false) // without faults, the share's own memory
		return len(msgs), pr.sendAll(msgs)
	}
	msgs, from, _ := pr.cur.span(n, false)
	acts := pr.cur.fs.acts[from : from+len(msgs)]
	sent := 0
	for i, m := range msgs {
		if a := acts[i]; a != 0 {
			ok, err := pr.sendHit(m, a)
			if err != nil {
				return sent, err
			}
			if ok {
				sent++
			}
			continue
		}
		if m.Kind == ackcore.Init {
			m.Task = pr.task
		}
		if err := pr.s.Send(m); err != nil {
			return sent, err
		}
		sent++
	}
	pr.clk.advance(sent)
	return sent, nil
}

// sendHit sends m, a message whose act a is set, rewritten (cursor.hit),
// unless a drops it, and reports whether it sent it. Out of line, so
// that sendNext's loop for the messages left alone is sendAll's.
//
//go:noinline
func (pr *producer) sendHit(m ackcore.Msg, a act) (bool, error) {
	if !pr.cur.hit(&m, a) {
		return false, nil
	}
	if m.Kind == ackcore.Init {
		m.Task = pr.task
	}
	return true, pr.s.Send(m)
}

// spoutTasker is a pipe whose producer p names its spout task otherwise
// than p: a netio client per producer owns one task, its task 0.
type spoutTasker interface{ SpoutTask(p int) uint32 }

func (pr *producer) poll() int {
	pr.out = pr.s.poll(pr.out[:0])
	pr.got.add(pr.out)
	return len(pr.out)
}

func (pr *producer) warmUp() result {
	var err error
	pr.cur.prefix(pr.batch, func(m []ackcore.Msg, _ []meta) {
		if err == nil {
			err = pr.sendAll(m)
			pr.poll()
		}
	})
	t0 := time.Now()
	for n := 0; err == nil && n < len(pr.cur.sh.cycle)/2 && time.Since(t0) < pr.warm; {
		var k int
		k, err = pr.sendNext(pr.batch)
		n += k
		pr.poll()
	}
	if err == nil {
		err = pr.s.Flush()
	}
	return result{err: err}
}

func (pr *producer) peak(msgs int64) result {
	var sent int64
	for !pr.stop.Load() && (msgs == 0 || sent < msgs) {
		want := pr.batch
		if msgs > 0 {
			want = int(min(int64(want), msgs-sent))
		}
		k, err := pr.sendNext(want)
		sent += int64(k)
		if err != nil {
			return result{sent: sent, err: err}
		}
		pr.poll()
	}
	return result{sent: sent, err: pr.s.Flush()}
}

// throttled sends at rate messages a second, in quanta of latencyQuantum,
// and times each root from its last ACK's send to its Completed's poll.
func (pr *producer) throttled(msgs int64, rate float64) result {
	if pr.lat == nil {
		pr.lat = make(map[uint64]time.Duration)
	}
	var sent int64
	t0 := time.Since(pr.base)
	for !pr.stop.Load() && (msgs == 0 || sent < msgs) {
		target := t0 + time.Duration(float64(sent)/rate*1e9)
		for {
			now := time.Since(pr.base)
			if now >= target || pr.stop.Load() {
				break
			}
			if pr.recordPoll() == 0 {
				if target-now > 200*time.Microsecond {
					time.Sleep(target - now - 100*time.Microsecond)
				} else {
					runtime.Gosched()
				}
			}
		}
		want := latencyQuantum
		if msgs > 0 {
			want = int(min(int64(want), msgs-sent))
		}
		batch, md := pr.cur.next(want, false)
		for i, m := range batch {
			if int(md[i].j) == pr.k-1 && m.Kind == ackcore.Ack {
				pr.lat[m.Root] = time.Since(pr.base)
			}
		}
		if err := pr.sendAll(batch); err != nil {
			return result{sent: sent, err: err}
		}
		if err := pr.s.Flush(); err != nil {
			return result{sent: sent, err: err}
		}
		sent += int64(len(batch))
		pr.recordPoll()
	}
	// Let the roots still in flight arrive, so that the last quanta are
	// timed too (a dropped root's entry waits for a timeout that the
	// stream clock will not reach here: hence the bounds).
	start := time.Now()
	for len(pr.lat) > 0 {
		waited := time.Since(start)
		if waited >= latencySettleEmpty || waited >= latencySettle && pr.hist.TotalCount() > 0 {
			break
		}
		if pr.recordPoll() == 0 {
			time.Sleep(20 * time.Microsecond)
		}
	}
	return result{sent: sent}
}

// recordPoll polls and times the completions of roots sent in the
// latency phase.
func (pr *producer) recordPoll() int {
	n := pr.poll()
	if n == 0 {
		return 0
	}
	now := time.Since(pr.base)
	for _, o := range pr.out {
		if t, ok := pr.lat[o.Root]; ok {
			if o.Kind == ackcore.Completed {
				record(pr.hist, now-t)
			}
			delete(pr.lat, o.Root)
		}
	}
	return n
}

func (pr *producer) drain() result {
	for !pr.cur.atRound() {
		msgs, _ := pr.cur.next(pr.batch, true)
		if err := pr.sendAll(msgs); err != nil {
			return result{err: err}
		}
		pr.poll()
	}
	pr.exp = expectation{roots: pr.cur.roots()}
	var err error
	pr.cur.drain(pr.batch, func(m []ackcore.Msg, _ []meta) {
		if err == nil {
			err = pr.sendAll(m)
			pr.poll()
		}
	})
	pr.exp.injFail, pr.exp.injDrop = pr.cur.injFail, pr.cur.injDrop
	if err == nil {
		err = pr.s.Flush()
	}
	if err != nil {
		return result{err: err}
	}
	// Every root but the dropped ones ends without a timeout.
	return pr.waitFor(func() bool {
		return pr.got.completed()+pr.got.explicit() >= pr.exp.roots-pr.exp.injDrop
	})
}

// waitFor polls until done or drainWait passes; the verification then
// says what is missing.
func (pr *producer) waitFor(done func() bool) result {
	deadline := time.Now().Add(drainWait)
	for !done() && time.Now().Before(deadline) {
		if pr.poll() == 0 {
			time.Sleep(50 * time.Microsecond)
		}
	}
	return result{}
}

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
		row.FaultFreeRatio = pairedRatio(row.RepMsgsPerSec, base.RepMsgsPerSec)
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
