package acktest

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/acktest/model"
	"github.com/xorack/xorack/internal/acktest/treegen"
	"github.com/xorack/xorack/internal/invariants"
	"github.com/xorack/xorack/internal/splitmix"
)

// Tally counts outs that completed and those that failed for reason, and
// fails t on any other outcome: for a test whose roots end only those two
// ways.
func Tally(t testing.TB, outs []ackcore.Outcome, reason ackcore.Reason) (completed, failed int) {
	t.Helper()
	for _, o := range outs {
		switch {
		case o.Kind == ackcore.Completed:
			completed++
		case o.Kind == ackcore.Failed && o.Reason == reason:
			failed++
		default:
			t.Fatalf("outcome %+v: want Completed or Failed{%v}", o, reason)
		}
	}
	return completed, failed
}

// InvalidMsgs returns one message for each way a message can be malformed,
// the root-0 one first: every acker must refuse each as invalid and
// change nothing.
func InvalidMsgs() []ackcore.Msg {
	return []ackcore.Msg{
		{Root: 0, Kind: ackcore.Ack, Val: 1},
		{Root: 1, Kind: 0},
		{Root: 1, Kind: 9},
		{Root: 1, Kind: ackcore.Init, Task: ackcore.MaxTask + 1, Val: 1},
		{Root: 1, Kind: ackcore.Reset, TimeoutMs: 25 * 3600 * 1000},
	}
}

// InitMsg is root's INIT from task, with the XOR of its first edges.
// InitMsg, AckMsg, FailMsg and ResetMsg are for the tests that write their
// message streams by hand.
func InitMsg(root uint64, task uint32, val uint64) ackcore.Msg {
	return ackcore.Msg{Root: root, Kind: ackcore.Init, Task: task, Val: val}
}

// AckMsg is an ACK of val for root.
func AckMsg(root, val uint64) ackcore.Msg {
	return ackcore.Msg{Root: root, Kind: ackcore.Ack, Val: val}
}

// FailMsg is a FAIL of root, without a val.
func FailMsg(root uint64) ackcore.Msg {
	return ackcore.Msg{Root: root, Kind: ackcore.Fail}
}

// ResetMsg is a RESET of root's timeout.
func ResetMsg(root uint64) ackcore.Msg {
	return ackcore.Msg{Root: root, Kind: ackcore.Reset}
}

// The clock geometry of every scenario. Timeout is short so that roots time
// out within a run; custom timeouts from DefaultGen reach 40 ms, twice it.
const (
	Tick    = time.Millisecond
	Timeout = 20 * time.Millisecond
)

// expireRoom is the room the harness gives each Expire call: small, so that
// an acker's "more" path is exercised.
const expireRoom = 7

// Factory makes the acker under test. The harness fills cfg.MaxPending,
// Timeout, Tick, Clock, Seed, Owners and OrphanShare; the factory may set
// anything else and must honour the first four.
type Factory func(cfg ackcore.Config) (ackcore.Interface, error)

// Verifier is implemented by ackers with an invariant checker; Run calls it
// every 16 steps and at the end.
type Verifier interface {
	Verify() error
}

// FailReserver is implemented by ackers that keep FAILs at the bound (the
// shard: rule 3 never loses a FAIL): FailReserve is how many entries FAILs
// may make beyond MaxPending. The model then follows the same rule; for
// other ackers it refuses a FAIL that needs an entry at the bound.
type FailReserver interface {
	FailReserve() int
}

// Evicter is implemented by ackers whose entries without INIT give way at
// the bound and whose FAIL hold-over has a budget (the shard, rule 10):
// FailBudget is how many FAILs one generation holds. The model then
// evicts the same way (model.SetEviction).
type Evicter interface {
	FailBudget() int
}

// Owned is implemented by ackers that count orphans per owner (the shard:
// Config.Owners, Config.OrphanShare, SetOwner). The model then bounds each
// owner's orphans the same way (model.SetOrphanShare); an acker without
// it runs a scenario with owners as one without.
type Owned interface {
	SetOwner(owner int)
	OrphanShare() int
}

// Scenario is one differential run's knobs.
type Scenario struct {
	Seed       uint64
	Roots      int             // roots generated (ignored when Gen.Roots is set)
	MaxPending int             // the bound; see Run for the invariant build's
	Gen        treegen.Options // zero: DefaultGen(Roots)
	Window     int             // shuffle window
	Dup, Drop  float64         // delivery faults
	MaxBatch   int             // batches are 1..MaxBatch messages
	JumpProb   float64         // chance of a clock jump past the default timeout
	// Progress runs the acker with ackcore.Config.ProgressTimeout (its
	// default cap) and the model with the same rule (model.SetProgress).
	Progress bool
	// Owners, if more than 1, gives each batch an owner drawn at random
	// from [0, Owners), and OrphanShare bounds each owner's orphans
	// (ackcore.Config.Owners and OrphanShare; see Owned).
	Owners, OrphanShare int
	// Drains makes failing tuples fail after their fan-out, their FAILs
	// carrying the ack val (treegen's FailAfterFanout), at three times
	// the default gen's fail rate: every failed tree leaves a drain for
	// its children's ACKs to empty (rule 3 of docs/semantics.md).
	Drains bool
}

// Case is a named scenario.
type Case struct {
	Name string
	Scenario
}

// Cases are the standard scenarios: in-order and shuffled streams, delivery
// faults, frequent timeouts, and bounds tight enough that Full outcomes are
// common. Seeds are left 0: callers loop over seeds.
func Cases() []Case {
	return []Case{
		{"clean-inorder", Scenario{Roots: 300, MaxPending: 4096, Window: 0, MaxBatch: 32}},
		{"shuffled", Scenario{Roots: 300, MaxPending: 4096, Window: 200, MaxBatch: 64}},
		{"faults", Scenario{Roots: 300, MaxPending: 4096, Window: 100, Dup: 0.02, Drop: 0.02, MaxBatch: 64, JumpProb: 0.02}},
		{"timeouts", Scenario{Roots: 200, MaxPending: 4096, Window: 50, Drop: 0.05, MaxBatch: 8, JumpProb: 0.1}},
		{"tight-bound", Scenario{Roots: 300, MaxPending: 20, Window: 300, Drop: 0.02, MaxBatch: 16, JumpProb: 0.05}},
		{"tiny-bound", Scenario{Roots: 100, MaxPending: 1, Window: 20, MaxBatch: 4, JumpProb: 0.05}},
		// Shuffled and faulty streams from three owners, each allowed a
		// few orphans: early ACKs and stray ones refused at the share.
		{"owners", Scenario{Roots: 300, MaxPending: 64, Window: 200, Drop: 0.03, Dup: 0.02, MaxBatch: 16, JumpProb: 0.05, Owners: 3, OrphanShare: 20}},
		{"owners-tight", Scenario{Roots: 200, MaxPending: 12, Window: 100, Drop: 0.02, MaxBatch: 8, JumpProb: 0.05, Owners: 5, OrphanShare: 4}},
		// Fails after fan-out whose FAILs carry their ack val: drains,
		// emptied by late ACKs, evicted at a tight bound, refused at a
		// small orphan share.
		{"drains", Scenario{Roots: 300, MaxPending: 4096, Window: 100, Dup: 0.01, Drop: 0.01, MaxBatch: 32, JumpProb: 0.02, Drains: true}},
		{"drains-tight", Scenario{Roots: 300, MaxPending: 24, Window: 150, Drop: 0.02, MaxBatch: 16, JumpProb: 0.05, Owners: 3, OrphanShare: 6, Drains: true}},
	}
}

// DefaultGen is the topology of the standard scenarios: small trees with
// joins, fails, resets and per-root timeouts up to 40 ms.
func DefaultGen(roots int) treegen.Options {
	return treegen.Options{
		Roots: roots, MaxFanout: 3, MaxDepth: 3, JoinProb: 0.2, FailProb: 0.03,
		ResetProb: 0.02, CustomProb: 0.05, MaxTimeout: 40, Tasks: 5,
	}
}

// FuzzScenario maps a fuzzer's inputs onto a scenario.
func FuzzScenario(seed uint64, roots, bound, faults uint8) Scenario {
	return Scenario{
		Seed: seed, Roots: int(roots), MaxPending: 1 + int(bound),
		Window: int(faults), Dup: float64(faults%16) / 200, Drop: float64(faults%8) / 100,
		MaxBatch: 1 + int(faults%64), JumpProb: float64(faults%32) / 300,
		// Seeds with bit 2 set: owners (1 to 8), each allowed 1 to 16 orphans.
		Owners: int(seed>>2&1) * (1 + int(seed>>3&7)), OrphanShare: int(seed>>2&1) * (1 + int(seed>>6&15)),
		// Seeds with bit 10 set: fails after fan-out, leaving drains.
		Drains: seed>>10&1 != 0,
	}
}

// RunCases runs every standard case for seeds 1..seeds (a quarter of them,
// at least 2, under -short) as subtests named after the cases. keep, if not
// nil, selects the cases to run.
func RunCases(t *testing.T, seeds int, newAcker Factory, keep func(Case) bool) {
	seeds = CaseSeeds(seeds)
	for _, c := range Cases() {
		if keep != nil && !keep(c) {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			for s := range seeds {
				sc := c.Scenario
				sc.Seed = uint64(s + 1)
				Run(t, sc, newAcker)
			}
		})
	}
}

// CaseSeeds is how many seeds RunCases given seeds runs a case for: all
// of them, or a quarter of them, at least 2, under -short.
func CaseSeeds(seeds int) int {
	if testing.Short() {
		return max(2, seeds/4)
	}
	return seeds
}

// Run feeds the same message stream, batches and clock to the acker and to
// the model, and fails on the first difference in outcomes (as sets per
// call, with latency within one tick of the true latency), counters or
// invariants, or on a root reported twice in a stream without duplicates. At the end it lets every root time out and checks that the
// acker holds nothing and that its counters still equal the model's.
// Under the invariant build, a bound the scenario's roots cannot reach
// runs on a smaller table (checkedBound): the same run, checked faster.
func Run(t testing.TB, sc Scenario, newAcker Factory) {
	t.Helper()
	failedBefore := t.Failed()
	defer func() {
		if t.Failed() && !failedBefore {
			t.Logf("scenario: %v", sc)
		}
	}()
	rng := rand.New(rand.NewPCG(sc.Seed, sc.Seed^splitmix.Golden))
	gen := sc.Gen
	if gen == (treegen.Options{}) {
		gen = DefaultGen(sc.Roots)
	}
	sc.MaxPending = checkedBound(sc.MaxPending, gen.Roots, invariants.Enabled)
	if sc.Drains {
		gen.FailAfterFanout, gen.FailProb = true, 3*gen.FailProb
	}
	evs, _ := treegen.Generate(rng, gen)
	evs, _ = treegen.Faults(rng, evs, sc.Window, sc.Dup, sc.Drop)
	maxBatch := max(sc.MaxBatch, 1)

	clock := &ackcore.FakeClock{}
	clock.Set(time.Duration(rng.Uint64N(uint64(time.Hour))))
	a, err := newAcker(ackcore.Config{
		MaxPending: sc.MaxPending, Timeout: Timeout, Tick: Tick,
		Clock: clock, Seed: rng.Uint64() | 1, ProgressTimeout: sc.Progress,
		Owners: max(sc.Owners, 1), OrphanShare: sc.OrphanShare,
	})
	if err != nil {
		t.Fatal(err)
	}
	m := model.New(sc.MaxPending, Timeout, Tick)
	if fr, ok := a.(FailReserver); ok {
		m.SetFailReserve(fr.FailReserve())
	}
	if ev, ok := a.(Evicter); ok {
		m.SetEviction(ev.FailBudget())
	}
	if sc.Progress {
		m.SetProgress(ackcore.DefaultProgressCap * Timeout)
	}
	owned, _ := a.(Owned)
	if owned != nil {
		m.SetOrphanShare(owned.OrphanShare())
	}
	r := &runner{t: t, a: a, m: m, clock: clock, once: sc.Dup == 0, outcomes: map[uint64]int{}}
	var out []ackcore.Outcome
	for len(evs) > 0 {
		r.step++
		n := min(1+rng.IntN(maxBatch), len(evs))
		if sc.Owners > 1 && owned != nil {
			o := rng.IntN(sc.Owners)
			owned.SetOwner(o)
			m.SetOwner(o)
		}
		batch := make([]ackcore.Msg, n)
		var want []ackcore.Outcome
		for i, e := range evs[:n] {
			batch[i] = e.Msg
			if o, ok := r.m.Apply(clock.Now(), e.Msg, e.IDs); ok {
				want = append(want, o)
			}
		}
		evs = evs[n:]
		out = a.Apply(batch, out[:0])
		r.check("apply", out, want)
		r.stats("apply")
		switch x := rng.Float64(); {
		case x < sc.JumpProb:
			clock.Add(Timeout + time.Duration(rng.Int64N(int64(Timeout))))
		case x < 0.5:
			clock.Add(time.Duration(rng.Int64N(int64(3 * Tick))))
		}
		r.expire()
		if r.step%16 == 0 {
			r.verify()
		}
	}
	// Drain: everything left times out (custom timeouts reach 2*Timeout).
	for range 4 {
		clock.Add(Timeout)
		r.expire()
	}
	r.verify()
	if p := a.Stats().Pending; p != 0 {
		t.Fatalf("%d entries pending after every deadline passed", p)
	}
}

// roomyBound is the bound checkedBound gives a scenario whose roots
// cannot reach its own: twice the roots (a root holds one entry at most),
// and at least 64.
func roomyBound(roots int) int { return max(2*roots, 64) }

// checkedBound is the MaxPending Run gives the acker and the model for a
// scenario's bound and roots. Under the invariant build (checked), where
// the shard checks its whole table at every step, O(slots) a step, a bound
// past roomyBound, one the roots cannot reach, is cut to it: the same
// stream, outcomes and counters on a smaller table, the standard cases'
// 4,096 on one for 600. Elsewhere the bound is the scenario's.
func checkedBound(maxPending, roots int, checked bool) int {
	if checked {
		return min(maxPending, roomyBound(roots))
	}
	return maxPending
}

type runner struct {
	t        testing.TB
	a        ackcore.Interface
	m        *model.Model
	clock    *ackcore.FakeClock
	once     bool           // no duplicated messages: every root ends at most once
	outcomes map[uint64]int // root -> Completed/Failed outcomes seen
	step     int
	exp      []ackcore.Outcome // Expire's buffer, reused
}

// expire drains the acker's due outcomes expireRoom at a time and compares
// them with the model's.
func (r *runner) expire() {
	r.t.Helper()
	exp := r.exp[:0]
	for {
		if cap(exp)-len(exp) < expireRoom {
			exp = append(make([]ackcore.Outcome, 0, 2*cap(exp)+expireRoom), exp...)
		}
		n := len(exp)
		res, more := r.a.Expire(exp[n : n : n+expireRoom])
		if len(res) > expireRoom {
			r.t.Fatalf("step %d: Expire appended %d outcomes into room for %d", r.step, len(res), expireRoom)
		}
		exp = append(exp, res...)
		if !more {
			break
		}
	}
	r.exp = exp
	r.check("expire", append([]ackcore.Outcome(nil), exp...), r.m.Expire(r.clock.Now()))
	r.stats("expire")
}

// check compares one call's outcomes with the model's, as sets.
func (r *runner) check(what string, got, want []ackcore.Outcome) {
	r.t.Helper()
	model.Sort(got)
	model.Sort(want)
	if len(got) != len(want) {
		r.t.Fatalf("step %d %s: %d outcomes, model %d\n got  %v\n want %v", r.step, what, len(got), len(want), got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Root != w.Root || g.Kind != w.Kind || g.Reason != w.Reason || g.Task != w.Task {
			r.t.Fatalf("step %d %s: outcome %d = %+v, model %+v", r.step, what, i, g, w)
		}
		if d := g.Latency - w.Latency; d < -Tick || d > Tick {
			r.t.Fatalf("step %d %s: root %#x latency %v, true latency %v", r.step, what, g.Root, g.Latency, w.Latency)
		}
		// Rule 8. A duplicated INIT arriving after its root ended starts
		// a new entry (the acker cannot tell), and a root refused Full may
		// be re-INITed, so the count is checked only without duplicates
		// and not for Full.
		if r.once && g.Kind != ackcore.Refused {
			r.outcomes[g.Root]++
			if r.outcomes[g.Root] > 1 && g.Reason != ackcore.ReasonFull {
				r.t.Fatalf("step %d: root %#x reported twice (%v)", r.step, g.Root, g.Kind)
			}
		}
	}
}

// verify checks the acker's invariants, if it has a checker, and its
// counters against the model's.
func (r *runner) verify() {
	r.t.Helper()
	if v, ok := r.a.(Verifier); ok {
		if err := v.Verify(); err != nil {
			r.t.Fatalf("step %d: %v", r.step, err)
		}
	}
	if g, w := r.a.Stats(), r.m.Stats(); g != w {
		r.t.Fatalf("step %d: stats\n got  %+v\n want %+v", r.step, g, w)
	}
}

// String names a scenario in failure messages and subtests.
func (sc Scenario) String() string {
	str := fmt.Sprintf("seed=%d roots=%d maxPending=%d window=%d dup=%g drop=%g maxBatch=%d jump=%g",
		sc.Seed, sc.Roots, sc.MaxPending, sc.Window, sc.Dup, sc.Drop, sc.MaxBatch, sc.JumpProb)
	if sc.Progress {
		str += " progress"
	}
	if sc.Owners > 1 {
		str += fmt.Sprintf(" owners=%d orphanShare=%d", sc.Owners, sc.OrphanShare)
	}
	if sc.Drains {
		str += " drains"
	}
	return str
}

// stats compares the acker's counters with the model's after a call: an
// outcome-free difference (an orphan expired or not) shows here at once.
func (r *runner) stats(what string) {
	r.t.Helper()
	if g, w := r.a.Stats(), r.m.Stats(); g != w {
		r.t.Fatalf("step %d %s: stats\n got  %+v\n want %+v", r.step, what, g, w)
	}
}
