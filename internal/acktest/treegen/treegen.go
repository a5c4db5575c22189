// Package treegen simulates the spout and bolt side of a topology to make
// message streams for testing ackers: random tuple trees, multi-anchored
// DAGs (joins within a root and across roots), explicit fails and resets,
// and then delivery faults (shuffles, duplicates, drops). Each message
// carries the list of edge ids it XORs, so the model can track the actual
// set of outstanding ids.
//
// The package is internal: only the repository's tests use
// it (see package acktest).
package treegen

import (
	"math/rand/v2"
	"slices"

	"github.com/xorack/xorack/ackcore"
)

// Event is one message with the edge ids whose XOR is its Val.
type Event struct {
	Msg ackcore.Msg
	IDs []uint64
}

// Options shape the generated topology.
type Options struct {
	Roots     int     // roots (spout emits) to generate
	MaxFanout int     // children per tuple: 0..MaxFanout
	MaxDepth  int     // tree depth below the spout tuples
	JoinProb  float64 // a child also anchored to a second pending tuple (maybe of another root)
	FailProb  float64 // a tuple fails instead of acking
	// FailAfterFanout: a failing tuple first anchors its children, which
	// go on (their ACKs come after its FAIL), and its FAIL carries the
	// ack val its ACK would have carried, with those ids (a drain: rule 3
	// of docs/semantics.md). Without it a failing tuple emits nothing
	// and its FAIL carries no val.
	FailAfterFanout bool
	ResetProb       float64 // a RESET is sent for a root when one of its tuples is processed
	CustomProb      float64 // an INIT or RESET carries its own timeout
	MaxTimeout      uint32  // largest custom timeout, ms (>= 1)
	Tasks           uint32  // spout tasks 0..Tasks-1
}

type tuple struct {
	ids     map[uint64][]uint64 // root -> incoming edge ids
	created map[uint64][]uint64 // root -> edge ids of children it anchored
	depth   int
}

// Generate returns the messages of opts.Roots roots in a causal order (each
// tuple's ack after its creation), and the root ids.
func Generate(rng *rand.Rand, o Options) ([]Event, []uint64) {
	var evs []Event
	var roots []uint64
	newID := func() uint64 {
		for {
			if v := rng.Uint64(); v != 0 {
				return v
			}
		}
	}
	var queue []*tuple
	process := func() {
		i := rng.IntN(len(queue))
		t := queue[i]
		queue[i] = queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if rng.Float64() < o.ResetProb {
			for _, r := range sortedRoots(t.ids) {
				evs = append(evs, Event{Msg: ackcore.Msg{Root: r, Kind: ackcore.Reset, TimeoutMs: custom(rng, o)}})
			}
		}
		fail := rng.Float64() < o.FailProb
		if fail && !o.FailAfterFanout {
			for _, r := range sortedRoots(t.ids) {
				evs = append(evs, Event{Msg: ackcore.Msg{Root: r, Kind: ackcore.Fail}})
			}
			return
		}
		if t.depth < o.MaxDepth {
			for n := rng.IntN(o.MaxFanout + 1); n > 0; n-- {
				child := &tuple{ids: map[uint64][]uint64{}, created: map[uint64][]uint64{}, depth: t.depth + 1}
				anchors := []*tuple{t}
				if len(queue) > 0 && rng.Float64() < o.JoinProb {
					anchors = append(anchors, queue[rng.IntN(len(queue))])
				}
				for _, a := range anchors {
					for _, r := range sortedRoots(a.ids) {
						e := newID()
						a.created[r] = append(a.created[r], e)
						child.ids[r] = append(child.ids[r], e)
					}
				}
				queue = append(queue, child)
			}
		}
		kind := ackcore.Ack
		if fail {
			kind = ackcore.Fail // after fan-out, carrying its ack val
		}
		for _, r := range sortedRoots(t.ids) {
			ids := append(append([]uint64(nil), t.ids[r]...), t.created[r]...)
			evs = append(evs, Event{Msg: ackcore.Msg{Root: r, Kind: kind, Val: xor(ids)}, IDs: ids})
		}
	}
	for n := 0; n < o.Roots; n++ {
		r := newID()
		roots = append(roots, r)
		var ids []uint64
		for k := rng.IntN(o.MaxFanout + 1); k > 0; k-- {
			e := newID()
			ids = append(ids, e)
			queue = append(queue, &tuple{ids: map[uint64][]uint64{r: {e}}, created: map[uint64][]uint64{}})
		}
		task := uint32(0)
		if o.Tasks > 0 {
			task = rng.Uint32N(o.Tasks)
		}
		evs = append(evs, Event{Msg: ackcore.Msg{Root: r, Kind: ackcore.Init, Task: task, Val: xor(ids), TimeoutMs: custom(rng, o)}, IDs: ids})
		// Interleave: process some pending tuples of earlier roots.
		for k := rng.IntN(4); k > 0 && len(queue) > 0; k-- {
			process()
		}
	}
	for len(queue) > 0 {
		process()
	}
	return evs, roots
}

func custom(rng *rand.Rand, o Options) uint32 {
	if o.MaxTimeout == 0 || rng.Float64() >= o.CustomProb {
		return 0
	}
	return 1 + rng.Uint32N(o.MaxTimeout)
}

func xor(ids []uint64) uint64 {
	var v uint64
	for _, id := range ids {
		v ^= id
	}
	return v
}

// Faults perturbs delivery: it shuffles within a window of the given size
// (0: no shuffle; len(evs): any order), duplicates events with probability
// dup and drops them with probability drop. It returns the new stream and
// the number of events dropped.
func Faults(rng *rand.Rand, evs []Event, window int, dup, drop float64) ([]Event, int) {
	out := make([]Event, 0, len(evs))
	dropped := 0
	for _, e := range evs {
		if rng.Float64() < drop {
			dropped++
			continue
		}
		out = append(out, e)
		if rng.Float64() < dup {
			out = append(out, e)
		}
	}
	if window > 1 {
		for i := range out {
			j := i + rng.IntN(min(window, len(out)-i))
			out[i], out[j] = out[j], out[i]
		}
	}
	return out, dropped
}

// sortedRoots returns m's roots in ascending order, so that a generator
// seed always gives the same stream (map order is random in Go).
func sortedRoots(m map[uint64][]uint64) []uint64 {
	rs := make([]uint64, 0, len(m))
	for r := range m {
		rs = append(rs, r)
	}
	slices.Sort(rs)
	return rs
}
