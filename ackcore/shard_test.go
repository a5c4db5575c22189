package ackcore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/acktest"
	"github.com/xorack/xorack/internal/splitmix"
	"github.com/xorack/xorack/internal/testkit"
)

func newShard(t testing.TB, maxPending int) (*ackcore.Shard, *ackcore.FakeClock) {
	t.Helper()
	clock := &ackcore.FakeClock{}
	s := mustShard(t, ackcore.Config{MaxPending: maxPending, Timeout: 30 * time.Second, Clock: clock, Seed: 42})
	return s, clock
}

// mustShard makes a shard, or fails the test.
func mustShard(t testing.TB, cfg ackcore.Config) *ackcore.Shard {
	t.Helper()
	s, err := ackcore.NewShard(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mustVerify fails the test if the shard's invariants do not hold.
func mustVerify(t testing.TB, s *ackcore.Shard) {
	t.Helper()
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
}

func one(t *testing.T, out []ackcore.Outcome) ackcore.Outcome {
	t.Helper()
	if len(out) != 1 {
		t.Fatalf("%d outcomes %v, want 1", len(out), out)
	}
	return out[0]
}

func none(t *testing.T, out []ackcore.Outcome) {
	t.Helper()
	if len(out) != 0 {
		t.Fatalf("unexpected outcomes %v", out)
	}
}

// rulePaths are the copies of the fast path (doc.go, "Where the rules
// live"): TestRules holds each to the same hand-written expectations.
var rulePaths = []struct {
	name  string
	setup func(t *testing.T, s *ackcore.Shard)
}{
	{"asm", func(t *testing.T, s *ackcore.Shard) { // ackRun
		if !ackcore.AckRunAvailable() {
			t.Skip("no AVX2: the assembly loop does not run here")
		}
	}},
	{"asm-far", func(t *testing.T, s *ackcore.Shard) { // ackRunFar, as tables past farAbove run
		if !ackcore.AckRunAvailable() {
			t.Skip("no AVX2: the assembly loop does not run here")
		}
		s.ForcePrefetch()
	}},
	{"go", func(t *testing.T, s *ackcore.Shard) { t.Cleanup(ackcore.SetAckRun(false)) }}, // fastPath
	{"go-prefetch", func(t *testing.T, s *ackcore.Shard) { // fastPath with homes
		t.Cleanup(ackcore.SetAckRun(false))
		s.ForcePrefetch()
	}},
}

// TestRules applies each rule of docs/semantics.md that one shard decides
// through each copy of the fast path (and step behind it).
func TestRules(t *testing.T) {
	for _, p := range rulePaths {
		t.Run(p.name, func(t *testing.T) {
			s, clock := newShard(t, 100)
			p.setup(t, s)
			testRules(t, s, clock)
		})
	}
}

func testRules(t *testing.T, s *ackcore.Shard, clock *ackcore.FakeClock) {
	// Rule 2: completion, latency from INIT.
	none(t, s.Apply([]ackcore.Msg{acktest.InitMsg(1, 7, 0xa^0xb)}, nil))
	clock.Add(5 * time.Millisecond)
	none(t, s.Apply([]ackcore.Msg{acktest.AckMsg(1, 0xa)}, nil))
	o := one(t, s.Apply([]ackcore.Msg{acktest.AckMsg(1, 0xb)}, nil))
	if o.Kind != ackcore.Completed || o.Task != 7 || o.Root != 1 {
		t.Fatalf("completion: %+v", o)
	}
	if d := o.Latency - 5*time.Millisecond; d < -time.Millisecond || d > time.Millisecond {
		t.Fatalf("latency %v, want 5ms within a tick", o.Latency)
	}
	// Rule 1: ACK before INIT.
	none(t, s.Apply([]ackcore.Msg{acktest.AckMsg(2, 0xc)}, nil))
	if o := one(t, s.Apply([]ackcore.Msg{acktest.InitMsg(2, 3, 0xc)}, nil)); o.Kind != ackcore.Completed || o.Task != 3 {
		t.Fatalf("ack before init: %+v", o)
	}
	// Rule 3: FAIL before INIT wins when the INIT comes, even at val 0.
	none(t, s.Apply([]ackcore.Msg{acktest.FailMsg(3), acktest.AckMsg(3, 0xd)}, nil))
	if o := one(t, s.Apply([]ackcore.Msg{acktest.InitMsg(3, 4, 0xd)}, nil)); o.Kind != ackcore.Failed || o.Reason != ackcore.ReasonExplicit || o.Task != 4 {
		t.Fatalf("fail before init: %+v", o)
	}
	// Rule 3: FAIL after INIT reports at once.
	none(t, s.Apply([]ackcore.Msg{acktest.InitMsg(4, 1, 0xe)}, nil))
	if o := one(t, s.Apply([]ackcore.Msg{acktest.FailMsg(4)}, nil)); o.Kind != ackcore.Failed || o.Reason != ackcore.ReasonExplicit {
		t.Fatalf("fail: %+v", o)
	}
	// Rule 4: INIT with val 0.
	if o := one(t, s.Apply([]ackcore.Msg{acktest.InitMsg(5, 2, 0)}, nil)); o.Kind != ackcore.Completed {
		t.Fatalf("init 0: %+v", o)
	}
	if s.Pending() != 0 {
		t.Fatalf("%d pending", s.Pending())
	}
	// Rule 5: timeout, RESET extends; rule 6: orphans expire silently.
	none(t, s.Apply([]ackcore.Msg{acktest.InitMsg(6, 9, 0xf), acktest.InitMsg(7, 9, 0xf), acktest.AckMsg(8, 0x1)}, nil))
	clock.Add(20 * time.Second)
	none(t, s.Apply([]ackcore.Msg{acktest.ResetMsg(7)}, nil))
	clock.Add(10 * time.Second)
	out, _ := s.Expire(make([]ackcore.Outcome, 0, 8))
	o = one(t, out)
	if o.Root != 6 || o.Reason != ackcore.ReasonTimeout || o.Task != 9 {
		t.Fatalf("timeout: %+v", o)
	}
	if st := s.Stats(); st.Orphans != 1 || st.Pending != 1 {
		t.Fatalf("after first expiry: %+v", st)
	}
	clock.Add(20 * time.Second)
	out, _ = s.Expire(out[:0])
	if o := one(t, out); o.Root != 7 || o.Reason != ackcore.ReasonTimeout {
		t.Fatalf("reset root: %+v", o)
	} else if d := o.Latency - 50*time.Second; d < -time.Millisecond || d > time.Millisecond {
		t.Fatalf("reset root latency %v, want 50s (from its INIT)", o.Latency)
	}
	// Per-root timeout.
	m := acktest.InitMsg(9, 1, 0x5)
	m.TimeoutMs = 100
	none(t, s.Apply([]ackcore.Msg{m}, nil))
	clock.Add(99 * time.Millisecond)
	out, _ = s.Expire(out[:0])
	none(t, out)
	clock.Add(time.Millisecond)
	out, _ = s.Expire(out[:0])
	if o := one(t, out); o.Root != 9 || o.Reason != ackcore.ReasonTimeout {
		t.Fatalf("custom timeout: %+v", o)
	}
	mustVerify(t, s)
}

// TestBound fills the table past its bound: INITs beyond it fail with
// Full, ACKs needing new entries are refused, nothing pending is lost, and
// room comes back as roots complete.
func TestBound(t *testing.T) {
	const bound = 1000
	s, _ := newShard(t, bound)
	var msgs []ackcore.Msg
	for r := uint64(1); r <= bound+10; r++ {
		msgs = append(msgs, acktest.InitMsg(r, uint32(r%5), r*splitmix.Golden))
	}
	out := s.Apply(msgs, nil)
	if len(out) != 10 {
		t.Fatalf("%d outcomes, want 10 refusals", len(out))
	}
	for i, o := range out {
		if o.Kind != ackcore.Failed || o.Reason != ackcore.ReasonFull || o.Root != uint64(bound+1+i) {
			t.Fatalf("outcome %d: %+v", i, o)
		}
	}
	if o := one(t, s.Apply([]ackcore.Msg{acktest.AckMsg(5000, 1)}, nil)); o.Kind != ackcore.Refused || o.Reason != ackcore.ReasonFull || o.Task != ackcore.NoTask {
		t.Fatalf("ack past bound: %+v", o)
	}
	// Every accepted root still completes.
	msgs = msgs[:0]
	for r := uint64(1); r <= bound; r++ {
		msgs = append(msgs, acktest.AckMsg(r, r*splitmix.Golden))
	}
	out = s.Apply(msgs, out[:0])
	if len(out) != bound {
		t.Fatalf("%d completions, want %d", len(out), bound)
	}
	st := s.Stats()
	if st.Completed != bound || st.FailedFull != 10 || st.RefusedFull != 1 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
	// Room is back.
	none(t, s.Apply([]ackcore.Msg{acktest.InitMsg(bound+1, 0, 3)}, nil))
	mustVerify(t, s)
}

func TestInvalid(t *testing.T) {
	s, _ := newShard(t, 10)
	bad := acktest.InvalidMsgs()
	out := s.Apply(bad, nil)
	if len(out) != len(bad) {
		t.Fatalf("%d outcomes for %d bad messages", len(out), len(bad))
	}
	for i, o := range out {
		if o.Kind != ackcore.Refused || o.Reason != ackcore.ReasonInvalid {
			t.Fatalf("message %d: %+v", i, o)
		}
		if err := bad[i].Validate(); err == nil || !strings.Contains(err.Error(), "ackcore:") {
			t.Fatalf("Validate(%+v) = %v", bad[i], err)
		}
	}
	if st := s.Stats(); st.RefusedInvalid != uint64(len(bad)) || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  ackcore.Config
		want string
	}{
		{ackcore.Config{}, "ackcore: Config.MaxPending 0 out of range"},
		{ackcore.Config{MaxPending: -3}, "MaxPending -3"},
		{ackcore.Config{MaxPending: ackcore.MaxPendingLimit + 1}, "MaxPending"},
		{ackcore.Config{MaxPending: 1, Timeout: -time.Second}, "Timeout -1s"},
		{ackcore.Config{MaxPending: 1, Timeout: 48 * time.Hour}, "Timeout 48h"},
		{ackcore.Config{MaxPending: 1, Tick: 2 * time.Second}, "ackcore: Config.Tick 2s out of range"},
		{ackcore.Config{MaxPending: 1, Tick: 3 * time.Millisecond, Timeout: 10 * time.Millisecond}, "whole number of ticks"},
		{ackcore.Config{MaxPending: 1, Timeout: 1500 * time.Microsecond}, "ackcore: Config.Timeout 1.5ms is not a whole number of ticks (Tick 1ms, the default)"},
		{ackcore.Config{MaxPending: 1, Tick: 2 * time.Millisecond, Timeout: 5 * time.Millisecond}, "ackcore: Config.Timeout 5ms is not a whole number of ticks (Tick 2ms)"},
	} {
		_, err := ackcore.NewShard(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewShard(%+v) = %v, want an error naming %q", c.cfg, err, c.want)
		}
	}
}

func TestOldestPending(t *testing.T) {
	s, clock := newShard(t, 100)
	for r := uint64(1); r <= 20; r++ {
		s.Apply([]ackcore.Msg{acktest.InitMsg(r, uint32(r), 1)}, nil)
		clock.Add(time.Second)
	}
	s.Apply([]ackcore.Msg{acktest.AckMsg(99, 1)}, nil) // no INIT yet, newest
	got := s.OldestPending(3, nil)
	if len(got) != 3 {
		t.Fatalf("%d roots", len(got))
	}
	for i, p := range got {
		want := time.Duration(20-i) * time.Second
		if p.Root != uint64(i+1) || p.Task != uint32(i+1) || p.Age < want-time.Millisecond || p.Age > want+time.Millisecond {
			t.Fatalf("oldest[%d] = %+v, want root %d aged %v", i, p, i+1, want)
		}
	}
	all := s.OldestPending(100, nil)
	if len(all) != 21 || all[20].Root != 99 || all[20].Task != ackcore.NoTask {
		t.Fatalf("all pending: %d, last %+v", len(all), all[len(all)-1])
	}
}

// TestNoAllocs: the batch paths allocate nothing once warm, given room
// for outcomes.
func TestNoAllocs(t *testing.T) {
	testkit.SkipUnderInvariants(t, "the invariant checks allocate")
	s, clock := newShard(t, 1<<12)
	msgs := make([]ackcore.Msg, 0, 64)
	out := make([]ackcore.Outcome, 0, 128)
	r := uint64(1)
	allocs := testing.AllocsPerRun(200, func() {
		msgs = msgs[:0]
		for i := 0; i < 8; i++ {
			r++
			msgs = append(msgs, acktest.InitMsg(r, 1, 3), acktest.AckMsg(r, 1), acktest.AckMsg(r+1000000, 5), acktest.FailMsg(r+2000000), acktest.AckMsg(r, 2))
		}
		out = s.Apply(msgs, out[:0])
		clock.Add(40 * time.Second) // everything left expires
		out, _ = s.Expire(out[:0])
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per batch", allocs)
	}
}

// TestBoundInOrder: within a batch, whether a message finds room at the
// bound depends on the messages before it: with MaxPending 1 and root A
// pending, a batch whose other root needs an entry, around A's
// completion, is refused before A completes and has room after.
func TestBoundInOrder(t *testing.T) {
	const a, b = 0xa, 0xb
	for _, c := range []struct {
		name  string
		init  ackcore.Msg // applied first: A pending at the bound
		batch []ackcore.Msg
		want  []ackcore.Outcome
		left  int
	}{{
		name:  "acks-around-completion",
		init:  acktest.InitMsg(a, 1, 5),
		batch: []ackcore.Msg{acktest.AckMsg(b, 0x10), acktest.AckMsg(a, 5), acktest.AckMsg(b, 0x20)},
		want: []ackcore.Outcome{
			{Root: b, Task: ackcore.NoTask, Kind: ackcore.Refused, Reason: ackcore.ReasonFull},
			{Root: a, Task: 1, Kind: ackcore.Completed},
		},
		left: 1, // B, made by its second ACK once A left
	}, {
		name:  "init-between-acks",
		init:  acktest.InitMsg(a, 1, 3),
		batch: []ackcore.Msg{acktest.AckMsg(a, 1), acktest.InitMsg(b, 2, 7), acktest.AckMsg(a, 2)},
		want: []ackcore.Outcome{
			{Root: b, Task: 2, Kind: ackcore.Failed, Reason: ackcore.ReasonFull},
			{Root: a, Task: 1, Kind: ackcore.Completed},
		},
		left: 0,
	}} {
		s, _ := newShard(t, 1)
		none(t, s.Apply([]ackcore.Msg{c.init}, nil))
		got := s.Apply(c.batch, nil)
		if len(got) != len(c.want) {
			t.Fatalf("%s: outcomes %v, want %v", c.name, got, c.want)
		}
		for i := range got {
			if g := got[i]; g.Root != c.want[i].Root || g.Kind != c.want[i].Kind || g.Reason != c.want[i].Reason || g.Task != c.want[i].Task {
				t.Fatalf("%s: outcomes %v, want %v", c.name, got, c.want)
			}
		}
		if p := s.Pending(); p != c.left {
			t.Fatalf("%s: %d pending, want %d", c.name, p, c.left)
		}
	}
}

// TestValidOnce: Valid, Validate and the shard agree on every malformed
// message and on well-formed ones at the edges of each rule.
func TestValidOnce(t *testing.T) {
	for _, m := range acktest.InvalidMsgs() {
		if m.Valid() || m.Validate() == nil {
			t.Errorf("%+v: Valid %v, Validate %v", m, m.Valid(), m.Validate())
		}
	}
	for _, m := range []ackcore.Msg{
		{Root: 1, Kind: ackcore.Init, Task: ackcore.MaxTask, Val: 1, TimeoutMs: uint32(ackcore.MaxTimeout / time.Millisecond)},
		{Root: ^uint64(0), Kind: ackcore.Reset},
		{Root: 1, Kind: ackcore.Fail, Task: ackcore.MaxTask + 1}, // Task matters on INIT only
	} {
		if !m.Valid() || m.Validate() != nil {
			t.Errorf("%+v: Valid %v, Validate %v", m, m.Valid(), m.Validate())
		}
	}
}
