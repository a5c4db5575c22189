package acktest

import (
	"fmt"
	"testing"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/acktest/model"
)

// recorder is an acker that passes every call to the shard it wraps and
// keeps the outcomes of each Apply, and of each round of Expire calls
// (until one says no more), sorted: Run compares them with the model's as
// sets, since their order follows the table's layout.
type recorder struct {
	ackcore.Interface
	calls   []string
	expired []ackcore.Outcome // this round's
}

func (r *recorder) Apply(msgs []ackcore.Msg, out []ackcore.Outcome) []ackcore.Outcome {
	n := len(out)
	out = r.Interface.Apply(msgs, out)
	r.calls = append(r.calls, fmt.Sprint("apply ", sorted(out[n:])))
	return out
}

func (r *recorder) Expire(out []ackcore.Outcome) ([]ackcore.Outcome, bool) {
	n := len(out)
	out, more := r.Interface.Expire(out)
	r.expired = append(r.expired, out[n:]...)
	if !more {
		r.calls = append(r.calls, fmt.Sprint("expire ", sorted(r.expired)))
		r.expired = r.expired[:0]
	}
	return out, more
}

// sorted is a sorted copy of outs.
func sorted(outs []ackcore.Outcome) []ackcore.Outcome {
	c := append([]ackcore.Outcome(nil), outs...)
	model.Sort(c)
	return c
}

// TestCheckedBound: each standard case whose roots cannot reach its bound
// returns, on the smaller table checkedBound gives it under the invariant
// build, the same outcomes call by call (as sets), latencies included, and the same
// counters as on its own table: the cut changes the table's size and
// nothing a run checks. A bound the roots can reach is left as it is, and
// outside the invariant build every bound is.
func TestCheckedBound(t *testing.T) {
	cut := 0
	for _, c := range Cases() {
		sc := c.Scenario
		sc.Seed = 3
		roots := DefaultGen(sc.Roots).Roots
		if b := checkedBound(sc.MaxPending, roots, false); b != sc.MaxPending {
			t.Fatalf("%s: bound %d outside the invariant build, want its own %d", c.Name, b, sc.MaxPending)
		}
		b := checkedBound(sc.MaxPending, roots, true)
		if sc.MaxPending <= roomyBound(roots) {
			if b != sc.MaxPending {
				t.Errorf("%s: bound %d cut to %d, under %d", c.Name, sc.MaxPending, b, roomyBound(roots))
			}
			continue
		}
		if b != roomyBound(roots) || b < 2*roots {
			t.Fatalf("%s: bound %d for %d roots cut to %d", c.Name, sc.MaxPending, roots, b)
		}
		cut++
		var runs [2]*recorder
		for i, bound := range []int{sc.MaxPending, b} {
			s := sc
			s.MaxPending = bound
			Run(t, s, func(cfg ackcore.Config) (ackcore.Interface, error) {
				sh, err := ackcore.NewShard(cfg)
				runs[i] = &recorder{Interface: sh}
				return runs[i], err
			})
		}
		if len(runs[0].calls) != len(runs[1].calls) {
			t.Fatalf("%s: %d calls at bound %d, %d at %d", c.Name, len(runs[0].calls), sc.MaxPending, len(runs[1].calls), b)
		}
		for i := range runs[0].calls {
			if runs[0].calls[i] != runs[1].calls[i] {
				t.Fatalf("%s: call %d at bound %d: %s\nat %d: %s", c.Name, i, sc.MaxPending, runs[0].calls[i], b, runs[1].calls[i])
			}
		}
		if g, w := runs[1].Stats(), runs[0].Stats(); g != w {
			t.Fatalf("%s: stats at bound %d %+v, at %d %+v", c.Name, b, g, sc.MaxPending, w)
		}
	}
	if cut != 5 {
		t.Errorf("%d cases cut, want the 5 whose bound is 4,096", cut)
	}
}
