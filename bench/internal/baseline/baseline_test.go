package baseline_test

import (
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/bench/internal/baseline"
	"github.com/xorack/xorack/internal/acktest"
	"github.com/xorack/xorack/internal/acktest/workload"
	"github.com/xorack/xorack/internal/splitmix"
)

// impl is one baseline with a constructor taking a Config.
type impl struct {
	name string
	make func(baseline.Config) (ackcore.Interface, error)
	// exact: matches the model. zeroAlloc: allocates nothing once warm.
	exact, zeroAlloc bool
}

var impls = []impl{
	{"gomap", func(c baseline.Config) (ackcore.Interface, error) { return baseline.NewGoMap(c) }, true, true},
	{"mutexmap", func(c baseline.Config) (ackcore.Interface, error) { return baseline.NewMutexMap(c) }, true, true},
	{"xsyncmap", func(c baseline.Config) (ackcore.Interface, error) { return baseline.NewXsyncMap(c) }, true, false},
	{"storm", func(c baseline.Config) (ackcore.Interface, error) {
		return baseline.NewStorm(c, baseline.StormOptions{})
	}, false, true},
	{"limit", func(c baseline.Config) (ackcore.Interface, error) { return baseline.NewLimit(c) }, false, true},
}

func mustMake(t testing.TB, b impl, c baseline.Config) ackcore.Interface {
	t.Helper()
	a, err := b.make(c)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// applyAll applies msgs in batches of batch messages, reusing out.
func applyAll(a ackcore.Interface, msgs []ackcore.Msg, batch int, out []ackcore.Outcome) []ackcore.Outcome {
	for len(msgs) > 0 {
		n := min(batch, len(msgs))
		out = a.Apply(msgs[:n], out[:0])
		msgs = msgs[n:]
	}
	return out
}

// TestAllocs replays a steady stream (2000 word-count trees pending) to
// each warmed-up baseline and measures allocations per message: none for
// GoMap, MutexMap, Storm and Limit; XsyncMap's are reported.
func TestAllocs(t *testing.T) {
	st := workload.Build(workload.WordCount, 2000, 1)
	const batch = 64
	for _, b := range impls {
		clock := &ackcore.FakeClock{}
		a := mustMake(t, b, baseline.Config{MaxPending: st.MaxPending(), Timeout: time.Minute, Clock: clock})
		out := make([]ackcore.Outcome, 0, batch)
		applyAll(a, st.Prefix, batch, out)
		for range 2 { // warm up: maps grow to the working set
			applyAll(a, st.Cycle, batch, out)
		}
		before := a.Stats().Completed
		allocs := testing.AllocsPerRun(3, func() {
			applyAll(a, st.Cycle, batch, out)
			clock.Add(time.Millisecond)
			a.Expire(out[:0])
		})
		perMsg := allocs / float64(len(st.Cycle))
		t.Logf("%s: %.3f allocs per message", b.name, perMsg)
		if b.zeroAlloc && allocs != 0 {
			t.Errorf("%s: %v allocs per cycle of %d messages, want 0", b.name, allocs, len(st.Cycle))
		}
		// Every replay completes one tree per slot.
		if got, want := a.Stats().Completed-before, uint64(4*st.Slots); got != want {
			t.Errorf("%s: %d completions in 4 cycles, want %d", b.name, got, want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, b := range impls {
		for _, c := range []struct {
			cfg  baseline.Config
			want string
		}{
			{baseline.Config{}, "MaxPending 0"},
			{baseline.Config{MaxPending: ackcore.MaxPendingLimit + 1}, "MaxPending"},
			{baseline.Config{MaxPending: 1, Timeout: -time.Second}, "Timeout -1s"},
			{baseline.Config{MaxPending: 1, Timeout: 48 * time.Hour}, "Timeout 48h"},
			{baseline.Config{MaxPending: 1, Tick: 2 * time.Second}, "Tick 2s"},
			{baseline.Config{MaxPending: 1, Tick: time.Nanosecond}, "Tick 1ns"},
			{baseline.Config{MaxPending: 1, Tick: 3 * time.Millisecond, Timeout: 10 * time.Millisecond}, "whole number of ticks"},
		} {
			_, err := b.make(c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "baseline: ") {
				t.Errorf("%s(%+v) = %v, want an error naming %q", b.name, c.cfg, err, c.want)
			}
		}
	}
	for _, o := range []baseline.StormOptions{{Buckets: 1}, {Buckets: 65}, {Rotation: -time.Second}} {
		if _, err := baseline.NewStorm(baseline.Config{MaxPending: 1}, o); err == nil {
			t.Errorf("NewStorm with %+v: no error", o)
		}
	}
}

// TestBound: past MaxPending, a new root's INIT fails with Full and an
// ACK, FAIL or RESET needing a new entry is refused, in every baseline but
// Limit (which refuses all three kinds alike and knows no INIT failure).
func TestBound(t *testing.T) {
	const bound = 100
	for _, b := range impls {
		a := mustMake(t, b, baseline.Config{MaxPending: bound, Clock: &ackcore.FakeClock{}})
		var msgs []ackcore.Msg
		for r := uint64(1); r <= bound+5; r++ {
			msgs = append(msgs, ackcore.Msg{Root: r, Kind: ackcore.Init, Task: 3, Val: r * splitmix.Golden})
		}
		out := a.Apply(msgs, nil)
		if len(out) != 5 {
			t.Fatalf("%s: %d outcomes, want 5: %v", b.name, len(out), out)
		}
		for i, o := range out {
			want := ackcore.Outcome{Root: uint64(bound + 1 + i), Task: 3, Kind: ackcore.Failed, Reason: ackcore.ReasonFull}
			if b.name == "limit" {
				want = ackcore.Outcome{Root: uint64(bound + 1 + i), Task: ackcore.NoTask, Kind: ackcore.Refused, Reason: ackcore.ReasonFull}
			}
			if o != want {
				t.Fatalf("%s: outcome %d = %+v, want %+v", b.name, i, o, want)
			}
		}
		out = a.Apply([]ackcore.Msg{{Root: 5000, Kind: ackcore.Ack, Val: 1}, {Root: 5001, Kind: ackcore.Fail}, {Root: 5002, Kind: ackcore.Reset}}, out[:0])
		wantRefused := 3
		if b.name == "limit" {
			wantRefused = 1 // FAIL and RESET carry Val 0: nothing to insert
		}
		if len(out) != wantRefused {
			t.Fatalf("%s: %d outcomes past the bound, want %d: %v", b.name, len(out), wantRefused, out)
		}
		for _, o := range out {
			if o.Kind != ackcore.Refused || o.Reason != ackcore.ReasonFull || o.Task != ackcore.NoTask {
				t.Fatalf("%s: %+v, want Refused{Full}", b.name, o)
			}
		}
		// Every accepted root still completes, and room comes back.
		msgs = msgs[:0]
		for r := uint64(1); r <= bound; r++ {
			msgs = append(msgs, ackcore.Msg{Root: r, Kind: ackcore.Ack, Val: r * splitmix.Golden})
		}
		if out = a.Apply(msgs, out[:0]); len(out) != bound {
			t.Fatalf("%s: %d completions, want %d", b.name, len(out), bound)
		}
		if s := a.Stats(); s.Pending != 0 || s.Completed != bound {
			t.Fatalf("%s: stats %+v", b.name, s)
		}
		if out = a.Apply(msgs[:1], out[:0]); len(out) != 0 {
			t.Fatalf("%s: %v after room came back", b.name, out)
		}
	}
}

// TestInvalid: malformed messages are refused as invalid and change
// nothing. Limit checks only the root.
func TestInvalid(t *testing.T) {
	bad := acktest.InvalidMsgs()
	for _, b := range impls {
		a := mustMake(t, b, baseline.Config{MaxPending: 10, Clock: &ackcore.FakeClock{}})
		msgs := bad
		if b.name == "limit" {
			msgs = bad[:1]
		}
		out := a.Apply(msgs, nil)
		if len(out) != len(msgs) {
			t.Fatalf("%s: %d outcomes for %d bad messages", b.name, len(out), len(msgs))
		}
		for i, o := range out {
			if o.Kind != ackcore.Refused || o.Reason != ackcore.ReasonInvalid || o.Root != msgs[i].Root {
				t.Fatalf("%s: message %d: %+v", b.name, i, o)
			}
		}
		if s := a.Stats(); s.RefusedInvalid != uint64(len(msgs)) || s.Pending != 0 {
			t.Fatalf("%s: stats %+v", b.name, s)
		}
	}
}

// TestEntrySizes pins the per-root sizes doc.go's layout table quotes.
func TestEntrySizes(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"GoMap entry", baseline.SizeofEntry, 16},
		{"XsyncMap xentry", baseline.SizeofXentry, 32},
		{"Storm stormEntry", baseline.SizeofStormEntry, 24},
		{"Limit slot", baseline.SizeofLimitSlot, 24},
		{"ackcore.Msg", unsafe.Sizeof(ackcore.Msg{}), 32},
	} {
		if c.got != c.want {
			t.Errorf("%s is %d bytes, want %d", c.name, c.got, c.want)
		}
	}
}
