package bench

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/xorack/xorack/affinity"
	"github.com/xorack/xorack/internal/acktest/workload"
	"github.com/xorack/xorack/perf"
)

// Report is a run's result: its configuration, the machine, and one Row
// per level x shape x pending window x impl.
type Report struct {
	Config   Config  `json:"config"`
	Machine  Machine `json:"machine"`
	PerfNote string  `json:"perf_note"`
	// Stalls is the machine's own latency floor, measured before the rows
	// with GOMAXPROCS spinning threads (stallProbe, quickStallProbe), and
	// StallsEnd the same measured after them.
	Stalls    Stalls `json:"stalls"`
	StallsEnd Stalls `json:"stalls_end"`
	// Busy says the stalls passed a threshold at the start or the end
	// (Stalls.busy), and Verdict says in words whether the ratios can be
	// trusted: verdictBusy or verdictQuiet, then what was measured.
	Busy    bool      `json:"busy"`
	Verdict string    `json:"verdict"`
	Notes   []string  `json:"notes"`
	Started time.Time `json:"started"`
	Seconds float64   `json:"seconds"`
	Rows    []Row     `json:"rows"`
	// CheckRatio is the floor the run was gated at (ackbench -check's
	// -check-ratio); 0 when it was not gated, and the HTML report then
	// shows no gate verdict.
	CheckRatio float64 `json:"check_ratio,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	Summary    string            `json:"summary"`
	Topology   affinity.Topology `json:"topology"`
	DetectErr  string            `json:"detect_error,omitempty"`
	GoVersion  string            `json:"go_version"`
	GOOS       string            `json:"goos"`
	GOARCH     string            `json:"goarch"`
	GOMAXPROCS int               `json:"gomaxprocs"`
	NumCPU     int               `json:"num_cpu"`
}

// detectMachine describes the running machine.
func detectMachine() Machine {
	t, err := affinity.Detect()
	m := Machine{
		Summary: t.Summary(), Topology: t, GoVersion: runtime.Version(),
		GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(),
	}
	if err != nil {
		m.DetectErr = err.Error()
	}
	return m
}

// Row is one measured implementation on one workload. Pointer fields are
// null in JSON (n/a in tables) when unknown, never zero.
type Row struct {
	Level     Level   `json:"level"`
	Impl      string  `json:"impl"`
	Shape     string  `json:"shape"`
	Pending   int     `json:"pending"`             // the window P asked for
	Producers int     `json:"producers,omitempty"` // pipeline only
	Shards    int     `json:"shards,omitempty"`    // pipeline only
	Conns     int     `json:"conns,omitempty"`     // net only: loopback connections, one producer each
	Batch     int     `json:"batch,omitempty"`     // net only: messages a producer hands over at once (SendBatch, Flush)
	FailRate  float64 `json:"fail_rate"`
	FailBare  bool    `json:"fail_bare,omitempty"` // FAILs without a val (Config.FailBare)
	DropRate  float64 `json:"drop_rate"`

	// Throughput: the median of the repetitions.
	MsgsPerSec    float64   `json:"msgs_per_sec"`
	TreesPerSec   float64   `json:"trees_per_sec"`
	RepMsgsPerSec []float64 `json:"rep_msgs_per_sec"`
	Msgs          int64     `json:"msgs"`    // measured messages, all reps
	Seconds       float64   `json:"seconds"` // measured time, all reps
	// Timing says what the seconds cover: "wall" (the replay loop) or
	// "acker-calls" (fault runs at core level: only Apply and Expire, not
	// the generator rewriting roots between calls).
	Timing string `json:"timing"`
	// RatioToXorack is MsgsPerSec over the xorack row's at the same
	// level, shape and window.
	RatioToXorack *float64 `json:"ratio_to_xorack"`

	// Memory: heap growth from before the acker was made to after warm-up,
	// over the entries then pending.
	BytesPerRoot   float64 `json:"bytes_per_root"`
	PendingWeighed int     `json:"pending_weighed"`
	MaxPending     int     `json:"max_pending"` // the bound configured (per shard at pipeline level)

	// Completion latency, ns.
	P50Ns         *int64  `json:"p50_ns"`
	P99Ns         *int64  `json:"p99_ns"`
	P999Ns        *int64  `json:"p999_ns"`
	MaxNs         *int64  `json:"max_ns"`
	LatencyCount  int64   `json:"latency_count"`
	LatencySource string  `json:"latency_source"`
	LatencyRate   float64 `json:"latency_offered_msgs_per_sec,omitempty"`

	GCCycles  uint32 `json:"gc_cycles"`
	GCPauseNs uint64 `json:"gc_pause_ns"`

	// CountersPerMsg maps perf event units (cycles, instructions,
	// cache-misses, branch-misses, task-clock-ns, context-switches,
	// page-faults) to counts per message; null where unavailable.
	CountersPerMsg map[string]*float64 `json:"counters_per_msg"`
	CounterScope   string              `json:"counter_scope"`

	TimeoutNs int64  `json:"timeout_ns"`
	Clock     string `json:"clock"`

	// Verification: what the workload emitted and what came back.
	Roots          uint64 `json:"roots"`
	Completed      uint64 `json:"completed"`
	FailedExplicit uint64 `json:"failed_explicit"`
	FailedTimeout  uint64 `json:"failed_timeout"`
	InjectedFail   uint64 `json:"injected_fail"`
	InjectedDrop   uint64 `json:"injected_drop"`
	// OrphansEvicted and FailsDropped are the acker's counters of orphan
	// entries that gave way at the bound and of FAILs past the filter's
	// budget (docs/semantics.md, rules 10 and 3); 0 for ackers without
	// them.
	// FaultFreeRatio, on a core or pipeline row of a run with fails or
	// drops, is its msgs/s over that of its fault-free twin, the same
	// impl, level and window run fault-free beside it: the median of the
	// ratios of their reps, which take turns (core, pipeline).
	FaultFreeRatio float64 `json:"fault_free_ratio,omitempty"`
	// BaselineRatio, on a source row fed by a broker, is its records/s
	// over the in-memory spout's sentences/s (impl memory-acked) in the
	// same run: the source's cost beside a fixed baseline.
	BaselineRatio float64 `json:"baseline_ratio,omitempty"`
	// WallBestRatio and CPURatio, on a source row fed by a broker, are its
	// records per second and per CPU-second (the process's, from each rep's
	// first record) over the in-memory spout's, rep by rep (the reps take
	// turns): the best of each, which Check gates. Other processes on the
	// machine spoil single reps, a regression lowers them all; CPU time
	// shows work that a busy machine hides in the wall clock, the wall
	// clock work on a thread that would otherwise idle.
	WallBestRatio  float64 `json:"wall_best_ratio,omitempty"`
	CPURatio       float64 `json:"cpu_ratio,omitempty"`
	OrphansEvicted uint64  `json:"orphans_evicted"`
	OrphansDrained uint64  `json:"orphans_drained"` // drains their trees' last ACKs emptied (fail runs without FailBare)
	FailsDropped   uint64  `json:"fails_dropped"`
	Verified       bool    `json:"verified"`
	VerifyError    string  `json:"verify_error,omitempty"` // what did not match, when not Verified

	*FaultStats // the faults level's figures, inlined; nil elsewhere
}

// Name is the row's benchmark name, key=value parts as Go benchmarks name
// sub-benchmarks: "level=core/impl=xorack/shape=wordcount/P=100000".
func (r *Row) Name() string {
	s := fmt.Sprintf("level=%s/impl=%s/shape=%s/P=%d", r.Level, r.Impl, r.Shape, r.Pending)
	if r.Level == LevelPipeline {
		s += fmt.Sprintf("/producers=%d/shards=%d", r.Producers, r.Shards)
	}
	if r.Level == LevelNet {
		s += fmt.Sprintf("/conns=%d/batch=%d/shards=%d", r.Conns, r.Batch, r.Shards)
	}
	if r.FailRate > 0 || r.DropRate > 0 {
		s += fmt.Sprintf("/fail=%g/drop=%g", r.FailRate, r.DropRate)
		if r.FailBare {
			s += "/bare"
		}
	}
	if r.FaultStats != nil {
		s += "/fault=" + r.Fault
	}
	return s
}

// Run runs every row of cfg and returns the report. A row that fails its
// verification is in the report with Verified false, and the error then
// wraps ErrVerification; any other error means cfg was invalid or an
// acker could not be built, and the report holds what ran.
func Run(cfg Config) (*Report, error) {
	r, err := cfg.prepare()
	if err != nil {
		return nil, err
	}
	rep := &Report{Config: r.Config, Machine: detectMachine(), PerfNote: perf.Probe().Note(), Started: time.Now()}
	rep.Config.Progress = nil
	probe := stallProbe
	if r.Quick {
		probe = quickStallProbe
	}
	rep.Stalls = measureStalls(probe, runtime.GOMAXPROCS(0))
	rn := &runner{cfg: r, rep: rep}
	rn.steps, rn.total = rn.plan()
	err = rn.run()
	rep.Seconds = time.Since(rep.Started).Seconds()
	rep.StallsEnd = measureStalls(probe, runtime.GOMAXPROCS(0))
	rep.Busy, rep.Verdict = verdict(rep.Stalls, rep.StallsEnd)
	fillRatios(rep.Rows)
	var verr []error
	for i := range rep.Rows {
		if !rep.Rows[i].Verified {
			verr = append(verr, fmt.Errorf("%s: %w: %s", rep.Rows[i].Name(), ErrVerification, rep.Rows[i].VerifyError))
		}
	}
	return rep, errors.Join(append([]error{err}, verr...)...)
}

// verdict judges the stalls measured before and after the rows.
func verdict(start, end Stalls) (bool, string) {
	busy := start.busy() || end.busy()
	v := verdictQuiet
	if busy {
		v = verdictBusy
	}
	return busy, fmt.Sprintf("%s (spinning threads lost %.0f%% of their time at the start, %.0f%% at the end, with %.1f and %.1f stalls of 1 ms or more per second; busy from %.0f%% or %.0f/s)",
		v, 100*start.Lost, 100*end.Lost, start.Over1ms, end.Over1ms, 100*busyLost, busyOver1ms)
}

// fillRatios sets each row's ratio to the xorack row of its group (at
// net level, the netio row with as many connections and the same batch).
func fillRatios(rows []Row) {
	type key struct {
		l          Level
		shape      string
		p          int
		conns      int
		batch      int
		fail, drop float64 // a fault row and its fault-free twin are apart
	}
	keyOf := func(r *Row) key { return key{r.Level, r.Shape, r.Pending, r.Conns, r.Batch, r.FailRate, r.DropRate} }
	ref := map[key]float64{}
	for i := range rows {
		if r := &rows[i]; r.Impl == Reference || r.Level == LevelNet && r.Impl == "netio" {
			ref[keyOf(r)] = r.MsgsPerSec
		}
	}
	for i := range rows {
		if x, ok := ref[keyOf(&rows[i])]; ok && x > 0 {
			v := rows[i].MsgsPerSec / x
			rows[i].RatioToXorack = &v
		}
	}
}

// runner runs a resolved config.
type runner struct {
	cfg   *resolved
	rep   *Report
	step  int
	steps int
	done  time.Duration // the estimated work of the steps before this one
	total time.Duration

	// For a Go benchmark (benchPipeline): timer runs during a pipeline
	// row's peak reps only, and peakOnly skips the latency run.
	timer    pipeTimer
	peakOnly bool

	// A pipeline row run beside its twin (pipeline) takes turns with it
	// on side 0 (the fault-free twin) or 1.
	turns *turns
	side  int

	// twinOf is the fault run a fault-free twin is run beside (faultFree),
	// nil otherwise.
	twinOf *runner
}

// progress reports the start of a step of estimated work w (stepCost).
func (rn *runner) progress(w time.Duration, format string, args ...any) {
	if rn.cfg.Progress != nil {
		rn.cfg.Progress(Progress{Step: rn.step, Steps: rn.steps, What: fmt.Sprintf(format, args...),
			Done: rn.done, Weight: w, Total: rn.total})
	}
	rn.step++
	rn.done += w
}

// The cost model of the progress ETA, per pending root, measured on the
// 2-vCPU machine (ackbench's default run, step by step; rounded): building
// a word-count stream, filling one impl's table before its reps, draining
// and verifying it after, and a pipeline or net row's setup beyond its
// fixed costRowFixed. With it the windows below P=1M are 0.36 of the
// default run's estimated work (0.35 measured), where they are 2/3 of its
// steps.
const (
	costBuild    = 3 * time.Microsecond
	costSetup    = 1 * time.Microsecond
	costDrain    = 1 * time.Microsecond
	costRow      = 1200 * time.Nanosecond
	costRowFixed = 250 * time.Millisecond
	costMsg      = 30 * time.Nanosecond // a measured message, when -msgs sets the reps
)

// repCost is one measured rep's estimated time.
func (rn *runner) repCost() time.Duration {
	if c := rn.cfg; c.Msgs > 0 {
		return time.Duration(c.Msgs/int64(c.Reps)) * costMsg
	}
	return rn.cfg.Duration / time.Duration(rn.cfg.Reps)
}

// plan counts the run's steps and their estimated work, in the order the
// levels run them.
func (rn *runner) plan() (steps int, total time.Duration) {
	c := rn.cfg
	add := func(n int, w time.Duration) { steps, total = steps+n, total+time.Duration(n)*w }
	rep := rn.repCost()
	for range c.shapes {
		for _, p := range c.Pending {
			add(1, time.Duration(p)*costBuild)
			twins := 1
			if c.faults() {
				twins = 2 // each row beside its fault-free twin
			}
			if k := twins * len(c.impls[LevelCore]); k > 0 {
				add(k, time.Duration(p)*costSetup)
				add(c.Reps*k, rep)
				add(k, time.Duration(p)*costDrain)
			}
			add(twins*len(c.impls[LevelPipeline]), rn.rowCost(p))
			add(len(c.impls[LevelNet])*len(c.Conns)*len(c.NetBatch), rn.rowCost(p))
		}
	}
	for _, l := range []Level{LevelTopology, LevelSource} {
		if k := len(c.impls[l]); k > 0 {
			add(1+k*c.Reps, rep) // calibration, reps
		}
	}
	if len(c.impls[LevelFaults]) > 0 {
		add(1+len(faultCases())*c.Reps, rep) // calibration, reps
	}
	return steps, total
}

// rowCost is a pipeline or net row's estimated work at window p: its
// measured time and its setup.
func (rn *runner) rowCost(p int) time.Duration {
	return time.Duration(rn.cfg.Reps)*rn.repCost() + costRowFixed + time.Duration(p)*costRow
}

func (rn *runner) run() error {
	if err := rn.streamLevels(); err != nil {
		return err
	}
	// The topology level makes its own sentences: it runs once, not per
	// shape and window.
	rows, err := rn.topologyLevel()
	rn.rep.Rows = append(rn.rep.Rows, rows...)
	if err != nil {
		return err
	}
	rows, err = rn.sourceLevel()
	rn.rep.Rows = append(rn.rep.Rows, rows...)
	if err != nil {
		return err
	}
	rows, err = rn.faultsLevel()
	rn.rep.Rows = append(rn.rep.Rows, rows...)
	return err
}

// streamLevels runs the levels that replay a workload stream, per shape
// and window.
func (rn *runner) streamLevels() error {
	if len(rn.cfg.impls[LevelCore])+len(rn.cfg.impls[LevelPipeline])+len(rn.cfg.impls[LevelNet]) == 0 {
		return nil
	}
	for _, shape := range rn.cfg.shapes {
		for _, p := range rn.cfg.Pending {
			rn.progress(time.Duration(p)*costBuild, "%s P=%d: building the stream", shape.Name, p)
			st := newStream(workload.Build(shape, p, rn.cfg.Seed))
			for _, l := range rn.cfg.Levels {
				var rows []Row
				var err error
				switch l {
				case LevelCore:
					rows, err = rn.core(st, p) // with faults, each row beside its twin, rep by rep
				case LevelPipeline:
					rows, err = rn.pipeline(st, p) // likewise
				case LevelNet:
					rows, err = rn.net(st, p)
				}
				rn.rep.Rows = append(rn.rep.Rows, rows...)
				if err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// faultFree is a copy of rn whose configuration has no fails or drops:
// a fault run's twin. It differs from rn in the faults alone: its acker
// runs on rn's clock (stream time), timeout and bound, so that the ratio
// of the two rows is what the faults cost, not what a clock ticking at
// another pace costs the timer wheel's passes.
func (rn *runner) faultFree() *runner {
	twin := *rn
	cfg := *rn.cfg
	cfg.FailRate, cfg.DropRate, cfg.FailBare = 0, 0, false
	twin.cfg, twin.twinOf = &cfg, rn
	return &twin
}

// streamTime reports whether rn's ackers run on a streamClock: in a run
// with fails or drops, and in its fault-free twins.
func (rn *runner) streamTime() bool { return rn.cfg.faults() || rn.twinOf != nil }

// baseRow fills the fields every row of a (level, stream) shares.
func (rn *runner) baseRow(l Level, impl string, st *stream, p int) Row {
	c := rn.cfg
	r := Row{Level: l, Impl: impl, Shape: st.Shape.Name, Pending: p, FailRate: c.FailRate, FailBare: c.FailBare && c.FailRate > 0, DropRate: c.DropRate}
	if l == LevelPipeline {
		r.Producers, r.Shards = c.Producers, c.Shards
		if impl != Reference {
			r.Shards = 1
		}
	}
	return r
}

// timeout is the acker timeout for a stream (see doc.go, "Time").
func (rn *runner) timeout(st *stream) time.Duration {
	if rn.twinOf != nil {
		return rn.twinOf.timeout(st)
	}
	if rn.cfg.Timeout > 0 {
		return rn.cfg.Timeout
	}
	if rn.cfg.faults() && (rn.cfg.DropRate > 0 || rn.cfg.FailBare) {
		// Stream time: a tree lives at most one cycle; 4 cycles of margin,
		// so that what dropped ACKs and bare FAILs leave times out in the
		// run. A run with fails alone, whose trees leave drains that their
		// late ACKs empty, keeps the fault-free timeout (in stream time):
		// the fault row differs from its twin in the fails alone.
		return roundUpMs(time.Duration(4 * st.cycleMsgs() * streamNsPerMsg))
	}
	// Real time: a tree lives one cycle of its acker's own time; at a
	// floor of 1 M messages a second with 3x margin, or Storm's 30 s
	// default if that is longer.
	return max(30*time.Second, roundUpMs(time.Duration(3*st.cycleMsgs())*time.Microsecond))
}

func roundUpMs(d time.Duration) time.Duration {
	return max((d+time.Millisecond-1)/time.Millisecond*time.Millisecond, time.Millisecond)
}

// faultHeadroom is the extra entries a fault run can leave pending. Each
// injected tree leaves an entry (its orphan acks after a FAIL, or the
// dropped root itself) for up to 3 timeouts (Storm drops at 2T..3T) plus
// the cycle it lived in, and a cycle injects rate x slots trees; twice
// that covers a failed tree's entry living on as an orphan after its
// fail, and 1024 covers small windows, where rates are lumpy. An acker
// whose orphans give way at the bound (docs/semantics.md, rule 10: xorack
// and GoMap) needs none for its failed trees, nor does one that keeps
// drains (rule 3) when the FAILs carry their val: it runs the fault-free
// bound, plus the roots waiting for their timeout after a dropped ACK,
// which are live roots (a spout's max pending would count them too).
func (rn *runner) faultHeadroom(st *stream, timeout time.Duration, evicts, drains bool) int {
	if rn.twinOf != nil {
		return rn.twinOf.faultHeadroom(st, timeout, evicts, drains)
	}
	if !rn.cfg.faults() {
		return 0
	}
	rate := rn.cfg.DropRate
	if !evicts && (rn.cfg.FailBare || !drains) {
		rate += rn.cfg.FailRate
	}
	if rate == 0 {
		return 0
	}
	cycleNs := float64(st.cycleMsgs() * streamNsPerMsg)
	cycles := 3*float64(timeout)/cycleNs + 2
	return int(2*rate*float64(st.Slots)*cycles) + 1024
}

// implDocs defines each implementation in one line, by level, for the
// lines under ackbench's table.
var implDocs = map[Level]map[string]string{
	LevelCore: {
		Reference:  "xorack's acker shard (ackcore.Shard): open-addressed table, timer wheel, one writer",
		GoMapName:  "the acker a Go programmer writes with map[root]entry, same semantics (baseline.GoMap)",
		"mutexmap": "that map behind a sync.Mutex (baseline.MutexMap)",
		"xsync":    "the same semantics on xsync's concurrent map, one Compute per message (baseline.XsyncMap)",
		"storm":    "a port of Apache Storm's acker: 3 rotating Go maps (baseline.Storm)",
		"limit":    "not an acker: a flat table doing only the XOR, insert and delete, the memory system's limit (baseline.Limit)",
	},
	LevelPipeline: {
		Reference:   "acker.Acker: producers -> rings -> shard executors -> outcome rings -> receivers",
		"mutexmap":  "one map under a lock every producer applies its batches to, outcomes in mutex-guarded inboxes",
		"chanshard": "one acker shard fed by a Go channel of 64-message blocks, outcomes back by channels",
	},
	LevelNet: {
		"netio":  "the acker behind loopback TCP: package netio's client and server (ackerd's)",
		"grpc":   "the same acker behind gRPC streams carrying the same records in the same batches",
		"inproc": "the same acker in process, no network: what the network adds",
	},
	LevelTopology: {
		"acked":   "word count on package topology with acking: one INIT per sentence, one ACK per tuple",
		"unacked": "the same word count at most once, no acker",
	},
	LevelSource: {
		"kafka-acked":     "word count from an in-process Kafka topic, offsets committed past acked sentences",
		"kafka-unacked":   "the same at most once: each record marked done as it is emitted",
		srcBaseline:       "the same word count from the in-memory spout: the brokers' rows are divided by it",
		"jetstream-acked": "word count from an embedded NATS JetStream stream, each message acked once its sentence is counted",
	},
	LevelFaults: {
		"acked": "word count with injected fails, drops, panics, a slow bolt and a stop mid-run, replayed until acked, dead or stopped",
	},
}

// implLines defines each (level, impl) of rows once, in row order.
func implLines(rows []Row) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rows {
		k := string(r.Level) + " " + r.Impl
		if seen[k] {
			continue
		}
		seen[k] = true
		doc := implDocs[r.Level][r.Impl]
		if doc == "" {
			doc = "(no description)"
		}
		out = append(out, fmt.Sprintf("%s %s: %s", r.Level, r.Impl, doc))
	}
	return out
}
