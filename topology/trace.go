package topology

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Tracing: why a root timed out. A spout executor traces one root in
// Config.TraceEvery (a countdown per executor: one decrement and a branch
// per root). A traced root's tuples each carry a *tupleTrace (Tuple.trace,
// nil for the rest: one load and a branch where a tuple is emitted,
// executed, acked or failed); the root's slot keeps the *rootTrace that
// lists them. When a traced root times out, its Failure says which tasks
// held its unacked tuples, and since when (Failure.Held).
//
// A rootTrace is shared by the executors its tuples pass through: its
// mutex guards it and every tupleTrace in it. Only traced roots take it.

// DefaultTraceEvery is Config.TraceEvery's default: one root in 1,000 is
// traced. At a million roots a second that is 1,000 traced trees a
// second, each a small allocation per tuple and a mutex per event: well
// under a percent of the engine's work, and a timeout wave of any size
// still explains itself by a thousandth of its roots.
const DefaultTraceEvery = 1000

// rootTrace is what the engine knows about where a traced root's tuples
// are.
type rootTrace struct {
	mu     sync.Mutex
	tuples []*tupleTrace // every tuple of the tree so far, in emit order
}

// tupleTrace is one tuple of a traced root. Guarded by root.mu.
type tupleTrace struct {
	root  *rootTrace
	dst   int32 // the task it was sent to
	state traceState
	at    int64 // engine clock, ns: when it was sent, then when it was delivered
}

type traceState uint8

const (
	traceSent      traceState = iota // staged or in the ring to dst
	traceDelivered                   // Execute called, not acked or failed yet
	traceDone                        // acked or failed
	traceLost                        // dropped in transit (fault injection)
)

// add returns the trace of a new tuple of the root sent to dst at now.
func (r *rootTrace) add(dst int32, now int64) *tupleTrace {
	tt := &tupleTrace{root: r, dst: dst, at: now}
	r.mu.Lock()
	r.tuples = append(r.tuples, tt)
	r.mu.Unlock()
	return tt
}

// set moves the tuple to state s at now.
func (tt *tupleTrace) set(s traceState, now int64) {
	tt.root.mu.Lock()
	if tt.state < traceDone {
		tt.state, tt.at = s, now
	}
	tt.root.mu.Unlock()
}

// childTrace is the trace a tuple sent to dst gets from its anchors: the
// first traced one's root (a tuple joined to several traced trees is
// followed in one), or nil.
func childTrace(one *Tuple, many []*Tuple, dst int32, now int64) *tupleTrace {
	if one != nil && one.trace != nil {
		return one.trace.root.add(dst, now)
	}
	for _, a := range many {
		if a.trace != nil {
			return a.trace.root.add(dst, now)
		}
	}
	return nil
}

// Held is where a traced root's unacked tuples were when it timed out:
// the tuples of one state at one task.
type Held struct {
	Component string
	Task      int // the global task id
	Tuples    int
	// Delivered: the task's Execute got them and has not acked or failed
	// them. Otherwise they were on their way to it (staged by the
	// emitter, in the ring, or taken from it by the task's executor and
	// waiting for the Execute calls before theirs), or, with Lost,
	// dropped in transit.
	Delivered bool
	Lost      bool
	// For is how long the oldest of them had been in that state.
	For time.Duration
}

// String says it as an operator reads it: "split[3]: 1 tuple delivered
// 29.8 s ago, not acked", "in ring to count[1]: 2 tuples for 29.8 s".
func (h Held) String() string {
	n := fmt.Sprintf("%d tuple", h.Tuples)
	if h.Tuples != 1 {
		n += "s"
	}
	ago := fmt.Sprintf("%.1f s", h.For.Seconds())
	switch {
	case h.Delivered:
		return fmt.Sprintf("%s[%d]: %s delivered %s ago, not acked", h.Component, h.Task, n, ago)
	case h.Lost:
		return fmt.Sprintf("lost on the way to %s[%d]: %s, %s ago", h.Component, h.Task, n, ago)
	}
	return fmt.Sprintf("in ring to %s[%d]: %s for %s", h.Component, h.Task, n, ago)
}

// held lists where the root's unacked tuples are at now, by task and
// state.
func (r *rootTrace) held(top *Topology, now int64) []Held {
	type key struct {
		task  int32
		state traceState
	}
	byKey := map[key]*Held{}
	var out []*Held
	r.mu.Lock()
	for _, tt := range r.tuples {
		if tt.state == traceDone {
			continue
		}
		k := key{tt.dst, tt.state}
		h := byKey[k]
		if h == nil {
			h = &Held{Component: top.taskComponent(int(tt.dst)).name, Task: int(tt.dst),
				Delivered: tt.state == traceDelivered, Lost: tt.state == traceLost}
			byKey[k] = h
			out = append(out, h)
		}
		h.Tuples++
		h.For = max(h.For, time.Duration(now-tt.at))
	}
	r.mu.Unlock()
	res := make([]Held, len(out))
	for i, h := range out {
		res[i] = *h
	}
	// The tasks executing first (the likely cause: what is queued behind
	// them waits for them), then what is on its way, then what was lost;
	// the longest-held first within each.
	rank := func(h Held) int {
		switch {
		case h.Delivered:
			return 0
		case h.Lost:
			return 2
		}
		return 1
	}
	slices.SortStableFunc(res, func(a, b Held) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return cmp.Compare(b.For, a.For)
	})
	return res
}

// heldString joins Failure.Held for Failure.Error.
func heldString(hs []Held) string {
	var b strings.Builder
	for i, h := range hs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(h.String())
	}
	return b.String()
}

// taskComponent returns the component that runs global task id task.
func (t *Topology) taskComponent(task int) *component {
	for _, c := range t.comps {
		if len(c.tasks) > 0 && task >= c.tasks[0] && task <= c.tasks[len(c.tasks)-1] {
			return c
		}
	}
	panic(fmt.Sprintf("topology: no component runs task %d", task))
}
