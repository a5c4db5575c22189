package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/internal/splitmix"
	"github.com/xorack/xorack/topology"
)

// The faults level: the word count with fan-out (sentence spout -> split
// bolt emitting 8 words -> count bolt, fields grouping) on the reference
// engine with topology.Config{}, under one fault per row, the rows
// interleaved rep by rep in one run:
//
//   - fail f (0, 1, 5, 10, 20%): the split bolt emits a sentence's words,
//     then fails the sentence on a fraction f of its attempts
//     (independently per attempt, from a hash of the sentence and the
//     attempt);
//   - drop: 1% of the sentences lose one ACK (the count bolt never acks
//     one of their words), so their trees time out and are replayed;
//   - poison: 0.1% of the sentences fail at every attempt and are
//     dead-lettered after the retry policy's last;
//   - slow: the count bolt is 10x slower for one second of the rep;
//   - mixed: fail 5% and poison 0.1% together;
//   - breaker: mixed with the retry-storm breaker on
//     (topology.Breaker{FailureRate: 0.5}); its goodput floor, which
//     ackbench -check gates, is 0.9 x the mixed row's (paired ratio):
//     the breaker judges an outage and must cost a run without one
//     little;
//   - join: breaker, with the count bolt a tick-flushed cross-tree join:
//     it holds its words and, on each tick of a clock spout (untracked,
//     once a millisecond), emits one tuple anchored to each pair of them
//     (two trees) to a sink and acks them, so a tree completes only on a
//     tick;
//   - panic: the split bolt panics halfway through a sentence's words on
//     1% of its attempts (faultsPanicRate): the engine recovers, fails
//     the attempt (reason panic), and the replay completes. Its goodput
//     floor is the fail rows' at that rate, and it is paired with the
//     fail 1% row too (vs_fail): what a panic costs over a Fail;
//   - stop: fail 1%, and once the spout has emitted half the sentences
//     the rep's goroutine calls Stop (the default shutdown: the drain,
//     with a minute's context). Goodput is until the Stop call, and the
//     row reports how long Stop took (stop_ns) and what it ended
//     (stopped: sentences the engine reported not finished, all reps).
//
// The panic and stop rows run on the zero topology.Config, its 30 s
// message timeout included (Logger aside: the panic row counts the
// engine's log lines rather than printing them); the others change the
// timeout (below). In those two rows the count bolt counts each
// sentence's words per attempt, so that verification also finds a
// sentence acked though no attempt the injection left alone was fully
// processed, or a word processed twice.
//
// Each row reports goodput (healthy sentences acked per second while the
// source has work: from Start to the spout's last first emit, the
// steady state a stream that never ends is in; the run's whole time,
// Start to Done, includes the tail of the last replays' backoffs and
// timeouts, and is the row's seconds), replays, healthy_dead (sentences dead-lettered though
// some attempt of theirs was not failed by the injection: the engine lost
// them), timeouts, and acker_pending_high (the most entries the acker
// held, sampled every millisecond). Verified: every sentence ended once
// (acked, or dead-lettered with every attempt failed by the injection)
// and healthy_dead is 0; the stop row's sentences may end stopped too,
// and those after the last one emitted must not end at all; the panic
// row's injected panics were each recovered (the split bolt's Panics),
// failed their attempt with reason panic (the spout's FailedPanic) and
// logged at most once per 10 s. floor_met: the goodput floor held, at fail rate
// f (the panic row's too) at least 0.8 x (1-f) x the fault-free row's goodput (the best at
// rate f is (1-f) x: a failed attempt's work is lost), judged on the
// median of the reps' paired ratios (goodput_ratio: rep k of the row over
// rep k of the fault-free row, which ran beside it), the breaker row at
// least 0.9 x the mixed row's (paired too), and the slow row had no
// timeouts. The one change from the zero topology.Config is the
// message timeout, faultsTimeout, so that the drop row's timeouts (and a
// quick run) finish in seconds.

// LevelFaults is the fault matrix (faults.go).
const LevelFaults Level = "faults"

// faultsImpls is the faults level's one implementation.
var faultsImpls = []string{"acked"}

// Fault-matrix parameters.
const (
	// faultsTimeout is the faults level's message timeout: short enough
	// that the drop row's trees time out and replay within a quick run
	// (DefaultMessageTimeout's 30 s would hold each dropped tree that
	// long), long enough that a tree that progresses never waits that long
	// behind the slow row's bolt (1024 pending sentences at a tenth of the
	// count bolt's speed queue for tens of ms), and long enough that a
	// stall of this shared machine (hundreds of ms happen on 2 vCPUs) does
	// not time out healthy attempts: at 250 ms a stall during the 20% row
	// timed out enough attempts to dead-letter healthy sentences.
	faultsTimeout = time.Second
	// faultsSentences and faultsQuickSentences are the sentences per rep
	// (unless Config.Msgs sets them): 200,000 is a few tenths of a second
	// fault-free on 2 vCPUs, long enough to reach a steady state.
	faultsSentences      = 200_000
	faultsQuickSentences = 50_000
	faultsDropRate       = 0.01
	faultsPoisonRate     = 0.001
	faultsSlowFor        = time.Second
	faultsSlowFactor     = 10
	// faultsFloor is the fraction of the best goodput at rate f,
	// (1-f) x the fault-free row's, that a row must reach.
	faultsFloor = 0.8
	// faultsMixedFail is the mixed rows' fail rate (with the poison).
	faultsMixedFail = 0.05
	// faultsBreakerFloor is the least the breaker row's goodput may be,
	// as a multiple of the mixed row's (the same faults, the breaker
	// off); ackbench -check fails below it.
	faultsBreakerFloor = 0.9
	// faultsTick is the join row's clock: how often its join flushes.
	faultsTick = time.Millisecond
	// faultsPanicRate is the panic row's rate, per attempt: a bug that a
	// small fraction of inputs hit (rarer, 0.1%, is 200 panics a quick
	// rep; a bolt that panics on most of its input is an outage, not a
	// fault to ride through), and the fail rows' 1%, so that the two rows
	// compare a panic's cost with a Fail's.
	faultsPanicRate = 0.01
	// faultsStopFail is the stop row's fail rate: replays are pending
	// or waiting out their backoff when Stop begins, which its drain
	// must finish.
	faultsStopFail = 0.01
	// faultsStopWait is the stop row's Stop context: time enough for the
	// drain, so that the row measures the default shutdown.
	faultsStopWait = time.Minute
)

// faultsFailRates are the fail rows' rates.
var faultsFailRates = []float64{0, 0.01, 0.05, 0.10, 0.20}

// FaultStats are a faults row's own figures (inlined in its JSON).
type FaultStats struct {
	Fault            string    `json:"fault"`   // "fail", "drop", "poison", "slow", "mixed", "breaker", "join", "panic" or "stop"
	Goodput          float64   `json:"goodput"` // healthy sentences acked per second until the last first emit (stop: until Stop), median rep
	RepGoodput       []float64 `json:"rep_goodput"`
	Replays          uint64    `json:"replays"`      // median rep's
	HealthyDead      uint64    `json:"healthy_dead"` // all reps
	PoisonDead       uint64    `json:"poison_dead"`  // all reps
	Timeouts         uint64    `json:"timeouts"`     // median rep's
	AckerPendingHigh int       `json:"acker_pending_high"`
	GoodputFloor     float64   `json:"goodput_floor"` // 0 where none applies
	// GoodputRatio is the median over reps of this row's goodput divided
	// by the fault-free row's in the same rep (0 where no floor applies):
	// the reps of all rows are interleaved, so a pair shares the machine's
	// moment, and a stall that slows one rep does not decide the floor.
	GoodputRatio float64 `json:"goodput_ratio"`
	// FloorMet: the goodput floor held (fail and breaker rows), and no
	// tree timed out behind the slow bolt (slow row); Floor says what
	// missed.
	FloorMet bool   `json:"floor_met"`
	Floor    string `json:"floor,omitempty"`
	// Gated: ackbench -check fails when this row's floor is not met (the
	// breaker row).
	Gated bool `json:"gated,omitempty"`
	// The panic row: the panics injected (median rep) and the median of
	// the reps' goodput over the fail row's at the same rate (paired).
	Panics uint64  `json:"panics,omitempty"`
	VsFail float64 `json:"vs_fail,omitempty"`
	// The stop row: how long Stop took (median rep; by rep), how many sentences
	// the spout had emitted when it returned (median rep), and how many
	// the engine reported not finished (stopped, all reps).
	StopNs       int64   `json:"stop_ns,omitempty"`
	RepStopNs    []int64 `json:"rep_stop_ns,omitempty"`
	StopEmitted  uint64  `json:"stop_emitted,omitempty"`
	StoppedTotal uint64  `json:"stopped,omitempty"`
}

// faultCase is one row of the matrix.
type faultCase struct {
	fault  string
	fail   float64 // per attempt, at the split bolt
	drop   float64 // of sentences, one ACK lost
	poison float64 // of sentences, failing every attempt
	slow   bool
	// breaker turns the retry-storm breaker on; join makes the count bolt
	// a tick-flushed cross-tree join.
	breaker, join bool
	panic         float64 // per attempt, at the split bolt
	// stop stops the topology at half the sentences; stopNow (tests
	// only) with a context already ended, which skips the drain: the
	// pending sentences are reported stopped.
	stop, stopNow bool
}

// defaults: the row runs on the zero topology.Config's timeout, and
// counts words per attempt (the panic and stop rows).
func (fc faultCase) defaults() bool { return fc.panic > 0 || fc.stop }

func faultCases() []faultCase {
	var cs []faultCase
	for _, f := range faultsFailRates {
		cs = append(cs, faultCase{fault: "fail", fail: f})
	}
	mixed := faultCase{fault: "mixed", fail: faultsMixedFail, poison: faultsPoisonRate}
	brk := mixed
	brk.fault, brk.breaker = "breaker", true
	join := brk
	join.fault, join.join = "join", true
	return append(cs, faultCase{fault: "drop", drop: faultsDropRate},
		faultCase{fault: "poison", poison: faultsPoisonRate},
		faultCase{fault: "slow", slow: true}, mixed, brk, join,
		faultCase{fault: "panic", panic: faultsPanicRate},
		faultCase{fault: "stop", fail: faultsStopFail, stop: true})
}

// chance is a uniform number in [0, 1) from a hash of its inputs.
func chance(seed uint64, id, attempt int, salt uint64) float64 {
	h := splitmix.Mix64(seed ^ uint64(id)<<24 ^ uint64(attempt)<<8 ^ salt)
	return float64(h>>11) / (1 << 53)
}

const (
	saltFail   = 0x11
	saltDrop   = 0x22
	saltPoison = 0x33
	saltPanic  = 0x44
)

// faultRun is one rep's shared state: what the injection did, per
// sentence, and the slow window.
type faultRun struct {
	fc       faultCase
	seed     uint64
	corpus   *wcCorpus
	injected []atomic.Int32 // by sentence: attempts the split bolt failed or panicked
	panics   atomic.Int64   // panics the split bolt threw
	// words: by wordsAt(sentence, attempt), the words the count bolt
	// executed (the panic and stop rows; nil in the others).
	words     []atomic.Int32
	slowFrom  atomic.Int64 // the slow window, ns since t0; 0: none
	slowUntil atomic.Int64
	slowSpin  time.Duration
	t0        time.Time
}

func (r *faultRun) poison(id int) bool {
	return r.fc.poison > 0 && chance(r.seed, id, 0, saltPoison) < r.fc.poison
}

// faultRep is one rep's figures.
type faultRep struct {
	d                       time.Duration // Start to Done
	goodput                 float64       // sentences acked per second until the last first emit
	healthy                 int           // healthy sentences acked
	replays, timeouts       uint64
	healthyDead, poisonDead uint64
	pendingHigh             int
	tuples                  int64
	panics                  uint64
	stop                    time.Duration // the Stop call (stop row)
	stopped                 int           // sentences reported stopped
	emitted                 int           // sentences the spout emitted
	err                     error
}

// runFaultRep runs n sentences under fc.
func runFaultRep(corpus *wcCorpus, fc faultCase, n int, seed uint64, pin bool, slowSpin time.Duration) (faultRep, error) {
	r := &faultRun{fc: fc, seed: seed, corpus: corpus, injected: make([]atomic.Int32, n), slowSpin: slowSpin}
	sp := &faultSpout{r: r, n: n, acked: make([]atomic.Int32, n), dead: make([]atomic.Int32, n), stopped: make([]atomic.Int32, n)}
	if fc.defaults() {
		r.words = make([]atomic.Int32, n*topology.DefaultMaxAttempts)
	}
	if fc.stop {
		sp.stopAt, sp.stopCh = n/2, make(chan struct{})
	}
	var made atomic.Int32
	b := topology.NewBuilder()
	b.Spout("sentences", func() topology.Spout {
		if made.Add(1) > 1 {
			return nil // one task: the spout keeps the outcomes
		}
		return sp
	}).Output("sentence", "id")
	b.Bolt("split", func() topology.Bolt { return faultSplit{r} }).Input("sentences", topology.Shuffle()).Output("word", "id")
	count := b.Bolt("count", func() topology.Bolt { return &faultCount{r: r, counts: map[string]int{}} }).Input("split", topology.Fields("word"))
	if fc.join {
		b.Spout("clock", func() topology.Spout {
			return &clockSpout{ended: func() bool { return sp.ended.Load() == int64(n) }}
		}).Output("tick")
		count.Input("clock", topology.All()).Output("word")
		b.Bolt("sink", func() topology.Bolt { return faultSink{} }).Input("count", topology.Shuffle())
	}
	cfg := topology.Config{}
	var logLines atomic.Int64
	if fc.defaults() {
		cfg.Logger = slog.New(lineCounter{&logLines})
	} else {
		cfg.MessageTimeout = faultsTimeout
	}
	cfg.Pin, cfg.Seed = pin, seed
	if fc.breaker {
		cfg.Breaker = topology.Breaker{FailureRate: 0.5}
	}
	top, err := b.Build(cfg)
	if err != nil {
		return faultRep{}, err
	}
	r.t0 = time.Now()
	if fc.slow {
		// The slow second starts once the pipeline is full: a tenth of the
		// way into the fault-free run's length, at least 50 ms.
		from := max(50*time.Millisecond, time.Duration(n)*time.Microsecond/10)
		r.slowFrom.Store(int64(from))
		r.slowUntil.Store(int64(from + faultsSlowFor))
	}
	if err := top.Start(); err != nil {
		return faultRep{}, err
	}
	high := 0
	tick := time.NewTicker(time.Millisecond)
	var rep faultRep
	stopped := false
sample:
	for {
		select {
		case <-top.Done():
			break sample
		case <-sp.stopCh: // nil but in the stop row
			// Stop from this goroutine, the spout's running on its own:
			// goodput is until the call.
			at := time.Since(r.t0)
			rep.goodput = float64(sp.acks.Load()) / at.Seconds()
			ctx, cancel := context.WithTimeout(context.Background(), faultsStopWait)
			if fc.stopNow {
				cancel()
			}
			err := top.Stop(ctx)
			cancel()
			rep.stop, stopped = time.Since(r.t0)-at, true
			if err != nil {
				return faultRep{}, err
			}
			break sample
		case <-tick.C:
			// AckerStats, not Metrics: Metrics merges every component's
			// latency histogram, and at one call per ms that was 14-16%
			// of the run's CPU, taken from the pipeline it measures.
			if a, ok := top.AckerStats(); ok {
				high = max(high, a.Pending)
			}
		}
	}
	tick.Stop()
	d := time.Since(r.t0)
	if !stopped {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := top.Stop(ctx); err != nil {
			return faultRep{}, err
		}
		rep.goodput = float64(sp.ackedByEnd) / sp.emitEnd.Seconds()
	}
	m := top.Metrics()
	spm, splitm := m.Component("sentences"), m.Component("split")
	rep.d, rep.replays, rep.timeouts, rep.pendingHigh = d, spm.Replayed, spm.FailedTimeout, high
	rep.tuples = int64(splitm.Executed + m.Component("count").Executed)
	rep.panics, rep.emitted = uint64(r.panics.Load()), sp.next
	ends := make([]sentenceEnd, n)
	for id := range ends {
		e := sentenceEnd{acked: sp.acked[id].Load(), dead: sp.dead[id].Load(), stopped: sp.stopped[id].Load(),
			injected: int(r.injected[id].Load()), poison: r.poison(id)}
		if r.words != nil {
			words := make([]int32, topology.DefaultMaxAttempts)
			for k := range words {
				words[k] = r.words[wordsAt(id, k+1)].Load()
			}
			e.tracked = true
			e.complete, e.twice = fullyProcessed(words, func(attempt int) bool {
				fail, panics := r.injects(id, attempt)
				return !fail && !panics
			})
		}
		ends[id] = e
	}
	t, bad := verifySentences(ends, sp.next, fc.stop)
	rep.healthy, rep.healthyDead, rep.poisonDead, rep.stopped = t.healthy, uint64(t.healthyDead), uint64(t.poisonDead), t.stopped
	if fc.defaults() {
		bad = append(bad, verifyPanics(r.panics.Load(), int64(splitm.Panics), int64(spm.FailedPanic), logLines.Load(), d)...)
	}
	if rep.healthyDead > 0 {
		// With the rep's failed attempts by reason: the row reports the
		// median rep's timeouts only, and a healthy dead letter needs a
		// failure the injection did not make.
		bad = append(bad, fmt.Sprintf("%d healthy sentences dead-lettered (this rep's failed attempts: %d explicit, %d timeout, %d lost, %d full, %d panic)",
			rep.healthyDead, spm.FailedExplicit, spm.FailedTimeout, spm.FailedLost, spm.FailedFull, spm.FailedPanic))
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		rep.err = errors.New(strings.Join(bad[:min(len(bad), 5)], "; "))
	}
	return rep, nil
}

// faultsLevel runs the fault matrix: the rows interleaved rep by rep,
// each row the median rep by goodput.
func (rn *runner) faultsLevel() ([]Row, error) {
	c := rn.cfg
	if len(c.impls[LevelFaults]) == 0 {
		return nil, nil
	}
	corpus := newWCCorpus()
	n := faultsSentences
	if c.Quick {
		n = faultsQuickSentences
	}
	if c.Msgs > 0 {
		n = int(c.Msgs)
	}
	cases := faultCases()
	// Calibration: a fault-free rep, for the slow row's extra work per
	// count tuple (9 times what a tuple costs the whole pipeline).
	rn.progress(rn.repCost(), "faults: warm-up and calibration")
	cal, err := runFaultRep(corpus, cases[0], n, c.Seed, !c.NoPin, 0)
	if err != nil {
		return nil, err
	}
	slowSpin := time.Duration(float64(cal.d) / float64(n*wcWords) * (faultsSlowFactor - 1))
	reps := make([][]faultRep, len(cases))
	for rep := range c.Reps {
		for i, fc := range cases {
			rn.progress(rn.repCost(), "faults %s %g: rep %d/%d", fc.fault, fc.fail, rep+1, c.Reps)
			fr, err := runFaultRep(corpus, fc, n, c.Seed+uint64(rep), !c.NoPin, slowSpin)
			if err != nil {
				return nil, err
			}
			reps[i] = append(reps[i], fr)
		}
	}
	var rows []Row
	var base float64
	var baseReps, mixedReps []float64
	failReps := map[float64][]float64{} // the fail rows' goodput by rate
	for i, fc := range cases {
		rs := reps[i]
		gp := make([]float64, len(rs))
		for k, fr := range rs {
			gp[k] = fr.goodput
		}
		order := make([]int, len(rs))
		for k := range order {
			order[k] = k
		}
		slices.SortFunc(order, func(a, b int) int {
			switch {
			case gp[a] < gp[b]:
				return -1
			case gp[a] > gp[b]:
				return 1
			}
			return 0
		})
		med := rs[order[len(order)/2]]
		fs := &FaultStats{Fault: fc.fault, Goodput: gp[order[len(order)/2]], RepGoodput: gp,
			Replays: med.replays, Timeouts: med.timeouts}
		timeout, roots := faultsTimeout, n
		scope := "faults: goodput counts healthy sentences acked from Start to the spout's last first emit (the steady state); trees/s and msgs/s divide by Start to Done"
		if fc.defaults() {
			timeout = topology.DefaultMessageTimeout
		}
		if fc.stop {
			roots = med.emitted
			scope = "faults: goodput counts sentences acked from Start to the Stop call; trees/s and msgs/s divide the sentences emitted and the tuples executed by Start to Stop's return"
			fs.StopNs, fs.StopEmitted = int64(med.stop), uint64(med.emitted)
		}
		row := Row{Level: LevelFaults, Impl: c.impls[LevelFaults][0], Shape: "wordcount", Pending: topology.DefaultMaxSpoutPending,
			FailRate: fc.fail, DropRate: fc.drop, FaultStats: fs, TimeoutNs: int64(timeout), Clock: "wall",
			TreesPerSec: float64(roots) / med.d.Seconds(), MsgsPerSec: float64(med.tuples) / med.d.Seconds(),
			Msgs: med.tuples, Seconds: med.d.Seconds(), Timing: "wall", Roots: uint64(roots), Completed: uint64(med.healthy),
			CounterScope: scope}
		var errs, floor []string
		for _, fr := range rs {
			fs.HealthyDead += fr.healthyDead
			fs.PoisonDead += fr.poisonDead
			fs.StoppedTotal += uint64(fr.stopped)
			if fc.stop {
				fs.RepStopNs = append(fs.RepStopNs, int64(fr.stop))
			}
			fs.AckerPendingHigh = max(fs.AckerPendingHigh, fr.pendingHigh)
			if fr.err != nil {
				errs = append(errs, fr.err.Error())
			}
		}
		if fc.fault == "fail" && fc.fail == 0 {
			base, baseReps = fs.Goodput, gp
		}
		if fc.fault == "fail" {
			failReps[fc.fail] = gp
		}
		if fc.panic > 0 {
			fs.Panics = med.panics
			fs.VsFail = median(pairRatios(gp, failReps[fc.panic]))
			if base > 0 {
				fs.GoodputFloor = faultsFloor * (1 - fc.panic) * base
				fs.GoodputRatio = median(pairRatios(gp, baseReps))
				if want := faultsFloor * (1 - fc.panic); fs.GoodputRatio < want {
					floor = append(floor, fmt.Sprintf("goodput %.2f x fault-free (median of the reps' paired ratios), below the floor %.2f x (0.8 x (1-%g)); %.2f x the fail %g row's", fs.GoodputRatio, want, fc.panic, fs.VsFail, fc.panic))
				}
			}
		}
		if fc.fault == "mixed" {
			mixedReps = gp
		}
		if fc.fault == "breaker" && len(mixedReps) > 0 {
			fs.Gated = true
			fs.GoodputRatio = median(pairRatios(gp, mixedReps))
			fs.GoodputFloor = faultsBreakerFloor * median(mixedReps)
			if fs.GoodputRatio < faultsBreakerFloor {
				floor = append(floor, fmt.Sprintf("goodput %.2f x the mixed row's, the breaker off (median of the reps' paired ratios), below the floor %.2f x", fs.GoodputRatio, faultsBreakerFloor))
			}
		}
		if fc.fault == "fail" && fc.fail > 0 && base > 0 {
			fs.GoodputFloor = faultsFloor * (1 - fc.fail) * base
			fs.GoodputRatio = median(pairRatios(gp, baseReps))
			if want := faultsFloor * (1 - fc.fail); fs.GoodputRatio < want {
				floor = append(floor, fmt.Sprintf("goodput %.2f x fault-free (median of the reps' paired ratios), below the floor %.2f x (0.8 x (1-%g))", fs.GoodputRatio, want, fc.fail))
			}
		}
		if fc.slow && fs.Timeouts > 0 {
			floor = append(floor, fmt.Sprintf("%d timeouts behind the slow bolt", fs.Timeouts))
		}
		fs.FloorMet, fs.Floor = len(floor) == 0, strings.Join(floor, "; ")
		row.Verified = len(errs) == 0
		row.VerifyError = strings.Join(errs, "; ")
		rows = append(rows, row)
	}
	return rows, nil
}

// faultsTable is the text table's section for the faults rows.
func faultsTable(rows []Row) []string {
	var out []string
	for _, r := range rows {
		fs := r.FaultStats
		if fs == nil {
			continue
		}
		if out == nil {
			out = append(out, "faults: fault    rate  goodput/s  floor/s  paired  replays  timeouts  healthy_dead  poison_dead  acker_pending_high  floor_met  verified")
		}
		rate := r.FailRate
		switch fs.Fault {
		case "drop":
			rate = r.DropRate
		case "poison":
			rate = faultsPoisonRate
		case "panic":
			rate = faultsPanicRate
		}
		floor, paired := "-", "-"
		if fs.GoodputFloor > 0 {
			floor = si(fs.GoodputFloor)
			paired = fmt.Sprintf("%.2fx", fs.GoodputRatio)
		}
		out = append(out, fmt.Sprintf("faults: %-7s %5g  %9s  %7s  %6s  %7d  %8d  %12d  %11d  %18d  %9v  %v",
			fs.Fault, rate, si(fs.Goodput), floor, paired, fs.Replays, fs.Timeouts, fs.HealthyDead, fs.PoisonDead, fs.AckerPendingHigh, fs.FloorMet, r.Verified))
	}
	// The panic and stop rows' own figures, a line each under the table.
	for _, r := range rows {
		switch fs := r.FaultStats; {
		case fs == nil:
		case fs.Fault == "panic":
			out = append(out, fmt.Sprintf("faults: panic: %d panics recovered and replayed (median rep); goodput %.2fx the fail %g row's (paired)",
				fs.Panics, fs.VsFail, faultsPanicRate))
		case fs.Fault == "stop":
			var lo, hi int64
			if len(fs.RepStopNs) > 0 {
				lo, hi = slices.Min(fs.RepStopNs), slices.Max(fs.RepStopNs)
			}
			out = append(out, fmt.Sprintf("faults: stop: Stop, called once half the sentences were emitted, took %v (reps %v-%v); %d sentences emitted, %d acked (median rep); %d reported stopped (all reps); goodput is until the call",
				time.Duration(fs.StopNs).Round(time.Microsecond), time.Duration(lo).Round(time.Microsecond), time.Duration(hi).Round(time.Microsecond), fs.StopEmitted, r.Completed, fs.StoppedTotal))
		}
	}
	return out
}

// faultsCheck is ackbench -check's gate on the faults rows: a gated row
// (the breaker row) whose floor was missed.
func faultsCheck(rep *Report) []string {
	var bad []string
	for _, r := range rep.Rows {
		if fs := r.FaultStats; fs != nil && fs.Gated && !fs.FloorMet {
			bad = append(bad, fmt.Sprintf("%s: %s", r.Name(), fs.Floor))
		}
	}
	return bad
}
