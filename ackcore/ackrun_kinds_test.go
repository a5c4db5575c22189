package ackcore

import (
	"testing"
	"time"
)

// TestCompletionByTimingClass completes, by ACKs amid other traffic and
// with room in out, roots of the timing classes the table holds: meta's
// top four bits, flagInit | flagNear | kind, the value ackRun's completek
// sorts completions by (8 + 4*near + kind). The assembly completes
// classes 8, 9 and 10 itself (kind 0, 1 and 2 without a near timer) and
// must hand the others to the rules: a near timer to free (12, 13, 15) or
// a side record to delete (11, 15). Class 12 (the default timing with a
// near timer) needs a default timeout of one tick, the limit being at most
// two ticks ahead then; class 14 (kind 2 with a near timer) is left out:
// a RESET that moves a one-tick default deadline on lands at or past the
// limit. Each root's class is checked before the batch, so that the batch
// covers what it claims; after it every root has its one Completed outcome
// with its task and its latency (from its INIT's tick: a kind read wrong
// moves the start by X or by the default), nothing is left (no near timer,
// side record or ext count: Verify; nothing times out later), and the
// assembly loop and the portable loop agree, outcome for outcome.
func TestCompletionByTimingClass(t *testing.T) {
	type special struct {
		name  string
		class uint64
		root  uint64
		init  uint32 // the INIT's TimeoutMs
		reset bool   // a RESET without a timeout once the clock moved
	}
	scenarios := []struct {
		name     string
		timeout  time.Duration // Config.Timeout (1 ms ticks)
		start    time.Duration // the INITs' time, after Expire calls each tick up to it
		moved    time.Duration // the RESETs' time
		done     time.Duration // the completing batch's time
		specials []special
	}{
		{
			name: "default 30 s", start: 0, moved: 3 * time.Millisecond, done: 4 * time.Millisecond,
			specials: []special{
				{name: "default", class: 8, root: 0x1001},
				{name: "own 2 s", class: 9, root: 0x1002, init: 2000},
				{name: "default moved by a RESET", class: 10, root: 0x1003, reset: true},
				{name: "side 20 min", class: 11, root: 0x1004, init: 20 * 60 * 1000},
				{name: "near own 5 ms", class: 13, root: 0x1005, init: 5},
				{name: "near own 5 ms moved by a RESET (side)", class: 15, root: 0x1006, init: 5, reset: true},
			},
		},
		{
			name: "default one tick", timeout: time.Millisecond, start: 4 * time.Millisecond,
			moved: 4 * time.Millisecond, done: 4 * time.Millisecond,
			specials: []special{
				{name: "near default", class: 12, root: 0x2001},
				{name: "near default too", class: 12, root: 0x2002},
			},
		},
	}
	const task, fill = 9, 60
	filler := func(i int) uint64 { return 0x9e3779b97f4a7c15 * uint64(i+1) }
	for _, sc := range scenarios {
		run := func(t *testing.T) []Outcome {
			clock := &FakeClock{}
			s, err := NewShard(Config{MaxPending: 1000, Timeout: sc.timeout, Clock: clock, Seed: 11})
			if err != nil {
				t.Fatal(err)
			}
			for clock.Now() < sc.start { // the limit moves ahead
				clock.Add(time.Millisecond)
				if out, _ := s.Expire(make([]Outcome, 0, 16)); len(out) != 0 {
					t.Fatalf("outcomes %v from an empty shard", out)
				}
			}
			// Filler: default roots, each INITed with 1^2 and acked by 1
			// and by 2, so that the specials' completions sit among ACKs
			// the loop applies itself, predicted and probed.
			var msgs []Msg
			for i := range fill {
				msgs = append(msgs, Msg{Root: filler(i), Kind: Init, Task: 1, Val: 1 ^ 2})
			}
			for _, sp := range sc.specials {
				msgs = append(msgs, Msg{Root: sp.root, Kind: Init, Task: task, Val: 5 ^ 6, TimeoutMs: sp.init})
			}
			for i := range fill {
				msgs = append(msgs, Msg{Root: filler(i), Kind: Ack, Val: 1})
			}
			mustApplyQuiet(t, s, msgs)
			clock.Set(sc.moved)
			msgs = msgs[:0]
			for _, sp := range sc.specials {
				msgs = append(msgs, Msg{Root: sp.root, Kind: Ack, Val: 5})
				if sp.reset {
					msgs = append(msgs, Msg{Root: sp.root, Kind: Reset})
				}
			}
			mustApplyQuiet(t, s, msgs)
			clock.Set(sc.done)
			for _, sp := range sc.specials {
				slot, ok := s.t.find(sp.root)
				if !ok {
					t.Fatalf("%s: root %#x not pending before its last ACK", sp.name, sp.root)
				}
				if c := s.t.e[slot].meta >> 60; c != sp.class {
					t.Fatalf("%s: timing class %d (meta %#x), want %d", sp.name, c, s.t.e[slot].meta, sp.class)
				}
			}
			// The batch: the specials' last ACKs spread among filler
			// ACKs, out with room for every outcome (the assembly hands
			// a completion to the rules when out is full).
			msgs = msgs[:0]
			for i := range fill {
				msgs = append(msgs, Msg{Root: filler(i), Kind: Ack, Val: 2})
				if i%10 == 5 && i/10 < len(sc.specials) {
					msgs = append(msgs, Msg{Root: sc.specials[i/10].root, Kind: Ack, Val: 6})
				}
			}
			out := s.Apply(msgs, make([]Outcome, 0, len(msgs)))
			if err := s.Verify(); err != nil {
				t.Fatalf("after the batch: %v", err)
			}
			got := map[uint64]Outcome{}
			for _, o := range out {
				if prev, dup := got[o.Root]; dup {
					t.Fatalf("root %#x: second outcome %+v after %+v", o.Root, o, prev)
				}
				got[o.Root] = o
			}
			want := sc.done - sc.start + DefaultTick/2 // the INITs on a tick
			for _, sp := range sc.specials {
				o, ok := got[sp.root]
				switch {
				case !ok:
					t.Errorf("%s: root %#x has no outcome", sp.name, sp.root)
				case o.Kind != Completed || o.Task != task || o.Latency != want:
					t.Errorf("%s: root %#x: %+v, want completed, task %d, latency %v", sp.name, sp.root, o, task, want)
				}
			}
			st := s.Stats()
			if len(out) != fill+len(sc.specials) || st.Pending != 0 || s.SideLen() != 0 || s.extCount != 0 {
				t.Fatalf("%d outcomes for %d roots; %d pending, %d side records, ext count %d", len(out), fill+len(sc.specials), st.Pending, s.SideLen(), s.extCount)
			}
			// Past every deadline: nothing is left to time out.
			clock.Set(time.Hour)
			if late := s.expireAll(nil); len(late) != 0 {
				t.Fatalf("an hour on: %d outcomes for roots already completed: %v", len(late), late)
			}
			return out
		}
		t.Run(sc.name, func(t *testing.T) {
			if !haveAckRun {
				run(t)
				t.Skip("no AVX2: the assembly loop does not run here; the portable loop checked alone")
			}
			asm := run(t)
			haveAckRun = false
			defer func() { haveAckRun = true }()
			port := run(t)
			if len(asm) != len(port) {
				t.Fatalf("%d outcomes from the assembly loop, %d from the portable loop", len(asm), len(port))
			}
			for i := range asm {
				if asm[i] != port[i] {
					t.Fatalf("outcome %d: assembly loop %+v, portable loop %+v", i, asm[i], port[i])
				}
			}
		})
	}
}

// mustApplyQuiet applies msgs, which must cause no outcome.
func mustApplyQuiet(t *testing.T, s *Shard, msgs []Msg) {
	t.Helper()
	if out := s.Apply(msgs, nil); len(out) != 0 {
		t.Fatalf("outcomes %v from messages that complete nothing", out)
	}
}
