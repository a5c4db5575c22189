package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/bench/internal/pipeline"
	"github.com/xorack/xorack/internal/acktest/workload"
	"github.com/xorack/xorack/internal/testkit"
)

// tiny is a run small enough for a unit test: a window of 500 roots and a
// few thousand messages per row.
func tiny(levels ...Level) Config {
	return Config{Levels: levels, Pending: []int{500}, Msgs: 6000, Reps: 2, Batch: 64, NoPin: true}
}

// rowKeys are the JSON keys every row must carry (the core figures first).
var rowKeys = []string{"level", "impl", "shape", "pending", "msgs_per_sec", "bytes_per_root", "p50_ns", "p99_ns", "verified",
	"trees_per_sec", "ratio_to_xorack", "p999_ns", "max_ns", "gc_cycles", "gc_pause_ns", "counters_per_msg", "roots", "completed"}

func runOK(t *testing.T, cfg Config) *Report {
	t.Helper()
	rep, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st := rep.Stalls; st.Threads != runtime.GOMAXPROCS(0) || st.Seconds <= 0 {
		t.Errorf("stall probe: %+v, want %d threads that spun", st, runtime.GOMAXPROCS(0))
	}
	return rep
}

func checkRows(t *testing.T, rep *Report, level Level, impls ...string) {
	t.Helper()
	var got []string
	for _, r := range rep.Rows {
		if r.Level != level {
			continue
		}
		got = append(got, r.Impl)
		if !r.Verified || r.MsgsPerSec <= 0 || r.Roots == 0 || r.Completed == 0 {
			t.Errorf("%s: verified %v, %.0f msgs/s, %d roots, %d completed: %s", r.Name(), r.Verified, r.MsgsPerSec, r.Roots, r.Completed, r.VerifyError)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range rowKeys {
			if _, ok := m[k]; !ok {
				t.Errorf("%s: JSON lacks %q", r.Name(), k)
			}
		}
	}
	if !slices.Equal(got, impls) {
		t.Errorf("%s rows %v, want %v", level, got, impls)
	}
}

func TestRunCore(t *testing.T) {
	rep := runOK(t, tiny(LevelCore))
	checkRows(t, rep, LevelCore, "xorack", "gomap", "mutexmap", "xsync", "storm", "limit")
	for _, r := range rep.Rows {
		if r.Impl == "limit" {
			if r.P50Ns != nil {
				t.Errorf("limit reports a latency: %d", *r.P50Ns)
			}
			continue
		}
		if r.P50Ns == nil || r.LatencyCount == 0 {
			t.Errorf("%s: no latency", r.Name())
		}
		if r.CountersPerMsg["cycles"] != nil && !strings.Contains(rep.PerfNote, "hardware and software") && !strings.Contains(rep.PerfNote, "some counters") {
			t.Errorf("%s: cycles known although %q", r.Name(), rep.PerfNote)
		}
	}
}

func TestRunPipeline(t *testing.T) {
	defer goleak.VerifyNone(t)
	cfg := tiny(LevelPipeline)
	cfg.Producers, cfg.Shards = 2, 2
	rep := runOK(t, cfg)
	checkRows(t, rep, LevelPipeline, "xorack", "mutexmap", "chanshard")
	for _, r := range rep.Rows {
		if r.P50Ns == nil || r.LatencyRate <= 0 {
			t.Errorf("%s: no latency run (p50 %v, rate %v)", r.Name(), r.P50Ns, r.LatencyRate)
		}
	}
}

// TestRunFaults injects explicit fails and drops at both levels: every
// row must still verify, with failures exactly where they were injected.
func TestRunFaults(t *testing.T) {
	levels := []Level{LevelCore, LevelPipeline}
	if testing.Short() {
		levels = levels[:1]
	}
	cfg := tiny(levels...)
	cfg.FailRate, cfg.DropRate, cfg.Msgs = 0.03, 0.03, 30000
	rep := runOK(t, cfg)
	// Each row beside its fault-free twin, run first (TestFaultTwins).
	checkRows(t, rep, LevelCore, "xorack", "gomap", "mutexmap", "xsync", "storm", "xorack", "gomap", "mutexmap", "xsync", "storm")
	if !testing.Short() {
		checkRows(t, rep, LevelPipeline, "xorack", "mutexmap", "chanshard", "xorack", "mutexmap", "chanshard")
	}
	for _, r := range rep.Rows {
		if r.FaultFreeRatio == 0 {
			continue // a fault-free twin (TestFaultTwins)
		}
		if r.InjectedFail == 0 || r.InjectedDrop == 0 {
			t.Errorf("%s: injected %d fails, %d drops", r.Name(), r.InjectedFail, r.InjectedDrop)
		}
		if r.FailedExplicit != r.InjectedFail || r.FailedTimeout != r.InjectedDrop || r.Completed+r.InjectedFail+r.InjectedDrop != r.Roots {
			t.Errorf("%s: %+v", r.Name(), r)
		}
		if r.Clock != "stream" {
			t.Errorf("%s: clock %q", r.Name(), r.Clock)
		}
	}
}

// TestRunFailAfterFanOut: 5% of roots failed after their fan-out, their
// other ACKs still arriving, with Storm's 30 s timeout (stream time: no
// orphan expires during the run) and the fault-free bound (no headroom),
// for xorack and for the Go-map baselines alike. With bare FAILs the late
// ACKs' orphans reach the bound and give way; with FAILs that carry their
// val each failed tree's drain is emptied by its late ACKs, and nothing
// is evicted. Either way every root not failed completes.
func TestRunFailAfterFanOut(t *testing.T) {
	levels := []Level{LevelCore, LevelPipeline}
	if testing.Short() {
		levels = levels[:1]
	}
	for _, bare := range []bool{true, false} {
		cfg := tiny(levels...)
		cfg.Impls = []string{"xorack", "gomap", "mutexmap"}
		cfg.FailRate, cfg.FailBare, cfg.Timeout, cfg.Msgs = 0.05, bare, 30*time.Second, 200_000
		rep := runOK(t, cfg)
		for _, r := range rep.Rows {
			if r.FaultFreeRatio == 0 {
				continue // a fault-free twin (TestFaultTwins)
			}
			gaveWay := r.OrphansEvicted > 0 && r.OrphansDrained == 0
			if !bare {
				gaveWay = r.OrphansEvicted == 0 && r.OrphansDrained > r.InjectedFail/2
			}
			if !r.Verified || !gaveWay || r.FailBare != bare || r.FailedExplicit != r.InjectedFail || r.Completed+r.InjectedFail != r.Roots {
				t.Errorf("%s: verified %v (%s), %d orphans evicted, %d drained, bound %d; %d of %d roots completed, %d failed of %d injected",
					r.Name(), r.Verified, r.VerifyError, r.OrphansEvicted, r.OrphansDrained, r.MaxPending, r.Completed, r.Roots, r.FailedExplicit, r.InjectedFail)
			}
		}
	}
}

// lossy wraps an acker and loses its n-th Completed outcome: the harness
// must notice.
type lossy struct {
	ackcore.Interface
	n, seen int
}

func (l *lossy) Apply(msgs []ackcore.Msg, out []ackcore.Outcome) []ackcore.Outcome {
	start := len(out)
	out = l.Interface.Apply(msgs, out)
	for i := start; i < len(out); i++ {
		if out[i].Kind != ackcore.Completed {
			continue
		}
		if l.seen++; l.seen == l.n {
			return append(out[:i], out[i+1:]...)
		}
	}
	return out
}

// lossyInbox loses the first outcome it polls.
type lossyInbox struct {
	acker.Inbox
	lost bool
}

func (in *lossyInbox) Poll(dst []ackcore.Outcome) []ackcore.Outcome {
	n := len(dst)
	dst = in.Inbox.Poll(dst)
	if !in.lost && len(dst) > n {
		in.lost = true
		dst = append(dst[:n], dst[n+1:]...)
	}
	return dst
}

type lossyPipe struct{ pipeline.Pipe }

func (p lossyPipe) Inbox(i int) acker.Inbox { return &lossyInbox{Inbox: p.Pipe.Inbox(i)} }

func TestVerificationCatchesLoss(t *testing.T) {
	defer goleak.VerifyNone(t)
	coreImpls = append(coreImpls, coreImpl{name: "lossy", exact: true, faults: true, latency: latencyTick,
		make: func(c ackcore.Config) (ackcore.Interface, error) {
			s, err := ackcore.NewShard(c)
			return &lossy{Interface: s, n: 100}, err
		}})
	pipeImpls = append(pipeImpls, pipeImpl{name: "lossypipe", make: func(pc pipeline.Config) (pipeline.Pipe, error) {
		p, err := pipeline.NewChanShard(pc)
		return lossyPipe{p}, err
	}})
	oldWait := drainWait
	drainWait = 100 * time.Millisecond
	defer func() {
		coreImpls = coreImpls[:len(coreImpls)-1]
		pipeImpls = pipeImpls[:len(pipeImpls)-1]
		drainWait = oldWait
	}()
	cfg := tiny(LevelCore, LevelPipeline)
	cfg.Impls = []string{"xorack", "lossy", "lossypipe"}
	rep, err := Run(cfg)
	if !errors.Is(err, ErrVerification) {
		t.Fatalf("error %v, want ErrVerification", err)
	}
	for _, r := range rep.Rows {
		bad := strings.HasPrefix(r.Impl, "lossy")
		if r.Verified == bad {
			t.Errorf("%s: verified %v: %s", r.Name(), r.Verified, r.VerifyError)
		}
		if bad && !strings.Contains(r.VerifyError, "outcomes") {
			t.Errorf("%s: error %q does not say what is missing", r.Name(), r.VerifyError)
		}
	}
	if len(Check(rep, CheckFloor)) == 0 {
		t.Error("Check passed a report with failed verifications")
	}
}

// TestVerify feeds verify hand-made tallies.
func TestVerify(t *testing.T) {
	exp := expectation{roots: 100, injFail: 3, injDrop: 2}
	good := func() tally {
		var g tally
		g.n[ackcore.Completed][ackcore.ReasonNone] = 95
		g.n[ackcore.Failed][ackcore.ReasonExplicit] = 3
		g.n[ackcore.Failed][ackcore.ReasonTimeout] = 2
		return g
	}
	if err := verify(check{exp: exp, got: good()}); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]check{
		"lost":      {exp: exp, got: func() tally { g := good(); g.n[ackcore.Completed][0]--; return g }()},
		"twice":     {exp: exp, got: func() tally { g := good(); g.n[ackcore.Completed][0]++; return g }()},
		"swapped":   {exp: exp, got: func() tally { g := good(); g.n[ackcore.Failed][1]--; g.n[ackcore.Failed][2]++; return g }()},
		"full":      {exp: exp, got: func() tally { g := good(); g.n[ackcore.Completed][0]--; g.n[ackcore.Failed][3]++; return g }()},
		"refused":   {exp: exp, got: func() tally { g := good(); g.n[ackcore.Refused][3]++; return g }()},
		"pending":   {exp: exp, got: good(), pendingLeft: 1, checkPending: true},
		"counters":  {exp: exp, got: good(), stats: &ackcore.Stats{Completed: 94, FailedExplicit: 3, FailedTimeout: 2}},
		"stopped":   {exp: exp, got: good(), stats: &ackcore.Stats{Completed: 95, FailedExplicit: 3, FailedTimeout: 2, FailedStopped: 1}},
		"no silent": {exp: exp, got: good(), silentTimeouts: 1},
	} {
		if err := verify(c); !errors.Is(err, ErrVerification) {
			t.Errorf("%s: verify returned %v", name, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// filled is c with its defaults, for a test that builds on a valid
// configuration.
func filled(c Config) Config {
	c, err := c.validate()
	if err != nil {
		panic(err)
	}
	return c
}

// synthetic is a report with hand-set rows, for the formats and the gate.
func synthetic(xorack, gomap float64) *Report {
	rep := &Report{Config: filled(Config{Reps: 3}), Machine: detectMachine(), PerfNote: "test", Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Stalls: Stalls{Threads: 2, Seconds: 0.3, Over10us: 1200, Over100us: 45, Over1ms: 0.5, MaxNs: 2_500_000}}
	for _, p := range []int{1000, 100000} {
		for _, r := range []struct {
			impl string
			rate float64
		}{{"xorack", xorack}, {"gomap", gomap}, {"storm", gomap / 3}} {
			rep.Rows = append(rep.Rows, Row{Level: LevelCore, Impl: r.impl, Shape: "wordcount", Pending: p,
				MsgsPerSec: r.rate, RepMsgsPerSec: []float64{r.rate * 0.99, r.rate, r.rate * 1.01}, Msgs: 3e6, Seconds: 0.3,
				BytesPerRoot: 40, P50Ns: ptr(int64(900)), P99Ns: ptr(int64(5000)), P999Ns: ptr(int64(9000)), MaxNs: ptr(int64(20000)),
				CountersPerMsg: map[string]*float64{"cycles": nil, "task-clock-ns": ptr(12.5)}, Verified: true})
		}
	}
	rep.Rows = append(rep.Rows, Row{Level: LevelPipeline, Impl: "xorack", Shape: "wordcount", Pending: 1000, Producers: 1, Shards: 1,
		MsgsPerSec: 1e7, RepMsgsPerSec: []float64{1e7}, Msgs: 1e6, Verified: true})
	fillRatios(rep.Rows)
	return rep
}

// TestTally counts a mix of outcomes, plain completions among the others,
// over two calls, into their kinds and reasons.
func TestTally(t *testing.T) {
	done := ackcore.Outcome{Kind: ackcore.Completed}
	expl := ackcore.Outcome{Kind: ackcore.Failed, Reason: ackcore.ReasonExplicit}
	late := ackcore.Outcome{Kind: ackcore.Failed, Reason: ackcore.ReasonTimeout}
	full := ackcore.Outcome{Kind: ackcore.Refused, Reason: ackcore.ReasonFull}
	var g tally
	g.add([]ackcore.Outcome{done, expl, done, late, done})
	g.add([]ackcore.Outcome{full, done, late})
	g.add(nil)
	if g.completed() != 4 || g.explicit() != 1 || g.timedOut() != 2 || g.failed() != 3 || g.refused() != 1 {
		t.Errorf("completed %d, explicit %d, timed out %d, failed %d, refused %d; want 4, 1, 2, 3, 1",
			g.completed(), g.explicit(), g.timedOut(), g.failed(), g.refused())
	}
}

func TestCheck(t *testing.T) {
	if bad := Check(synthetic(60e6, 20e6), CheckFloor); len(bad) != 0 {
		t.Errorf("3x passed as %v", bad)
	}
	bad := Check(synthetic(30e6, 20e6), CheckFloor)
	if len(bad) != 2 || !strings.Contains(bad[0], "P=1000: xorack 30.0M msgs/s is 1.50x gomap's 20.0M") {
		t.Errorf("1.5x: %q", bad)
	}
	rep := synthetic(60e6, 20e6)
	rep.Rows[1].Verified, rep.Rows[1].VerifyError = false, "lost one"
	if bad := Check(rep, CheckFloor); len(bad) != 1 || !strings.Contains(bad[0], "lost one") {
		t.Errorf("unverified row: %q", bad)
	}
	rep = synthetic(60e6, 20e6)
	rep.Rows = slices.DeleteFunc(rep.Rows, func(r Row) bool { return r.Impl == "gomap" && r.Pending == 1000 })
	if bad := Check(rep, CheckFloor); len(bad) != 1 || !strings.Contains(bad[0], "P=1000: no xorack and gomap") {
		t.Errorf("missing gomap: %q", bad)
	}
	rep.Rows = rep.Rows[len(rep.Rows)-1:] // pipeline only
	if bad := Check(rep, CheckFloor); len(bad) != 1 || !strings.Contains(bad[0], "no core rows") {
		t.Errorf("no core rows: %q", bad)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	rep := synthetic(60e6, 20e6)
	var buf bytes.Buffer
	if err := WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	_ = WriteJSON(&a, rep)
	_ = WriteJSON(&b, back)
	if a.String() != b.String() {
		t.Fatalf("round trip differs:\n%s\n---\n%s", a.String(), b.String())
	}
	if back.Rows[0].CountersPerMsg["cycles"] != nil || *back.Rows[0].CountersPerMsg["task-clock-ns"] != 12.5 || !back.Started.Equal(rep.Started) {
		t.Errorf("round trip lost values: %+v", back.Rows[0])
	}
	if _, err := ReadJSON(strings.NewReader(`{"rows": 7}`)); err == nil {
		t.Error("ReadJSON accepted a malformed report")
	}
}

// TestBenchfmt parses every benchmark line as benchstat does: a name
// without spaces, an iteration count, then value-unit pairs.
func TestBenchfmt(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteBenchfmt(&buf, synthetic(60e6, 20e6)); err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if !strings.HasPrefix(line, "Benchmark") {
			if k, _, ok := strings.Cut(line, ": "); !ok || strings.ContainsAny(k, " \t") {
				t.Errorf("header line %q is not key: value", line)
			}
			continue
		}
		lines++
		f := strings.Fields(line)
		if len(f) < 4 || len(f)%2 != 0 {
			t.Fatalf("line %q: %d fields", line, len(f))
		}
		if !strings.HasPrefix(f[0], "BenchmarkAckbench/level=") {
			t.Errorf("name %q", f[0])
		}
		if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
			t.Errorf("line %q: iterations %q", line, f[1])
		}
		units := map[string]bool{}
		for i := 2; i < len(f); i += 2 {
			if _, err := strconv.ParseFloat(f[i], 64); err != nil {
				t.Errorf("line %q: value %q", line, f[i])
			}
			units[f[i+1]] = true
		}
		for _, u := range []string{"ns/op", "msgs/s", "B/root"} {
			if !units[u] {
				t.Errorf("line %q lacks %s", line, u)
			}
		}
		if units["cycles/op"] {
			t.Errorf("line %q reports an unknown counter", line)
		}
	}
	if lines != 3*6+1 {
		t.Errorf("%d benchmark lines, want one per repetition (19)", lines)
	}
}

// TestFaultLevelLabel checks a fault row's level label: its fails and
// drops together, as short as they were given (0.05 + 0.01 is 0.06, not
// the float sum's 17 digits).
func TestFaultLevelLabel(t *testing.T) {
	rep := synthetic(60e6, 20e6)
	r := rep.Rows[0]
	r.FailRate, r.DropRate, r.FaultFreeRatio = 0.05, 0.01, 0.9
	rep.Rows = append(rep.Rows, r)
	var buf bytes.Buffer
	if err := WriteTable(&buf, rep); err != nil {
		t.Fatal(err)
	}
	if s := buf.String(); !strings.Contains(s, string(r.Level)+":f0.06 ") || strings.Contains(s, "0.0600000") {
		t.Errorf("table lacks the level %q:\n%s", string(r.Level)+":f0.06", s)
	}
}

func TestTableAndHTML(t *testing.T) {
	rep := synthetic(60e6, 20e6)
	var buf bytes.Buffer
	if err := WriteTable(&buf, rep); err != nil {
		t.Fatal(err)
	}
	s := buf.String()
	for _, want := range []string{"machine:", "perf:    test", "stalls:  2 threads spinning 0.30 s each", ">=100µs 45/s", "longest 2.50ms",
		"60.0M", "1.00x", "0.33x", "n/a", "12.5", "900ns"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	buf.Reset()
	if err := WriteHTML(&buf, rep); err != nil {
		t.Fatal(err)
	}
	h := buf.String()
	if !strings.Contains(h, "Stalls: 2 threads") {
		t.Error("HTML lacks the stall line")
	}
	if n := strings.Count(h, "<svg"); n != 5 { // core throughput and bytes per root, pipeline's bar, core latency at 2 windows
		t.Errorf("%d charts, want 5", n)
	}
	if strings.Contains(h, "<?xml") || !strings.HasPrefix(h, "<!DOCTYPE html>") || strings.Contains(h, "src=") {
		t.Error("HTML is not one self-contained page")
	}
	// One window, every percentile equal: log axes need a range.
	rep.Rows = rep.Rows[:1]
	v := ptr(int64(500_000))
	rep.Rows[0].P50Ns, rep.Rows[0].P99Ns, rep.Rows[0].P999Ns, rep.Rows[0].MaxNs = v, v, v, v
	if err := WriteHTML(&bytes.Buffer{}, rep); err != nil {
		t.Fatal(err)
	}
}

// TestCoreLoopAllocs: the measured loop (cursor, Apply, tally, clock,
// sampling, Expire) allocates nothing once warm, with and without the
// fault generator.
func TestCoreLoopAllocs(t *testing.T) {
	testkit.SkipUnderInvariants(t, "the invariant checks allocate")
	st := newStream(workload.Build(workload.WordCount, 1000, 2))
	for _, faults := range []bool{false, true} {
		rn := &runner{cfg: &resolved{Config: filled(Config{Batch: 64, Quick: true, Seed: 1})}}
		if faults {
			rn.cfg.FailRate, rn.cfg.DropRate = 0.05, 0.05
		}
		impl, _ := findCore(Reference)
		timeout := rn.timeout(st)
		cr, err := rn.coreSetup(impl, st, st.shares(1)[0], st.MaxPending()+rn.faultHeadroom(st, timeout, impl.evicts, impl.drains), timeout)
		if err != nil {
			t.Fatal(err)
		}
		cr.clk.resume()
		step := func() {
			block, _ := cr.cur.next(cr.batch*genBlock, false)
			for i := 0; i < len(block); i += cr.batch {
				cr.apply(block[i:min(i+cr.batch, len(block))], true)
			}
		}
		for range 50 {
			step()
		}
		if n := testing.AllocsPerRun(50, step); n != 0 {
			t.Errorf("faults %v: %v allocations per block", faults, n)
		}
	}
}

// TestFaultTwins: a run with fails gives each core and pipeline row a
// fault-free twin, listed before it, and each fault row its msgs/s over
// its twin's: at core level the ratio of the rows' medians (the twin ran
// just before), at pipeline level the median of the reps' paired ratios
// (the two rows' reps took turns); the ratios to xorack keep the two
// apart; and Check holds a xorack fault row to FaultFloor of its twin (a
// hand-set ratio below it fails the gate, the measured rows' verdict is
// left to the benchmark).
func TestFaultTwins(t *testing.T) {
	cfg := tiny(LevelCore, LevelPipeline)
	cfg.Impls = []string{"xorack", "gomap", "mutexmap"}
	cfg.FailRate, cfg.DropRate = 0.05, 0.01
	rep := runOK(t, cfg)
	type key struct {
		l    Level
		impl string
	}
	twins, faults := map[key]Row{}, map[key]Row{}
	for _, r := range rep.Rows {
		k := key{r.Level, r.Impl}
		switch {
		case r.FailRate == 0 && r.FaultFreeRatio == 0:
			twins[k] = r
		case r.FailRate == 0.05 && r.FaultFreeRatio > 0:
			faults[k] = r
			tw, ok := twins[k]
			want := median(pairRatios(r.RepMsgsPerSec, tw.RepMsgsPerSec)) // both levels pair them rep by rep
			if !ok || len(r.RepMsgsPerSec) != cfg.Reps || len(tw.RepMsgsPerSec) != cfg.Reps || math.Abs(r.FaultFreeRatio-want) > 1e-9 {
				t.Errorf("%s: fault-free ratio %v, twin %+v (want it before its fault row)", r.Name(), r.FaultFreeRatio, tw)
			}
			if r.RatioToXorack == nil || r.Impl == Reference && *r.RatioToXorack != 1 {
				t.Errorf("%s: ratio to xorack %v, want it against the xorack fault row", r.Name(), r.RatioToXorack)
			}
			// The twin differs in the faults alone: the same clock, timing,
			// timeout and bound (the drops' headroom included).
			if tw.Clock != "stream" || tw.Clock != r.Clock || tw.Timing != r.Timing || tw.TimeoutNs != r.TimeoutNs || tw.MaxPending != r.MaxPending {
				t.Errorf("%s: twin on clock %q, timing %q, timeout %v, bound %d; fault row on %q, %q, %v, %d", r.Name(),
					tw.Clock, tw.Timing, tw.TimeoutNs, tw.MaxPending, r.Clock, r.Timing, r.TimeoutNs, r.MaxPending)
			}
		default:
			t.Errorf("%s: fail rate %v, fault-free ratio %v", r.Name(), r.FailRate, r.FaultFreeRatio)
		}
	}
	// core: xorack, gomap, mutexmap; pipeline: xorack, mutexmap.
	if len(twins) != 5 || len(faults) != 5 {
		t.Fatalf("%d twins and %d fault rows, want 5 of each", len(twins), len(faults))
	}
	slow := &Report{Rows: []Row{{Level: LevelPipeline, Impl: Reference, FailRate: 0.05, FaultFreeRatio: 0.79, Verified: true}}}
	if bad := Check(slow, CheckFloor); !slices.ContainsFunc(bad, func(s string) bool { return strings.Contains(s, "fault-free twin") }) {
		t.Errorf("Check of a fault row at 0.79x its twin: %q", bad)
	}
	slow.Rows[0].FaultFreeRatio = 0.81
	if bad := Check(slow, CheckFloor); slices.ContainsFunc(bad, func(s string) bool { return strings.Contains(s, "fault-free twin") }) {
		t.Errorf("Check of a fault row at 0.81x its twin: %q", bad)
	}
}
