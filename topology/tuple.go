package topology

import (
	"fmt"
	"math/bits"
)

// Tuple is one tuple delivered to one bolt task. Its values are shared
// with the emitter and with the other tasks it went to: do not modify
// them. A Tuple belongs to the executor it was delivered to; anchor,
// ack and fail it only from there.
type Tuple struct {
	values  []any
	stream  *stream
	srcTask int32
	dstTask int32
	attempt uint32
	state   tupleState // written by the receiving executor only
	anchors anchorSet
	// ackVal is the XOR of the edge ids of the tuples anchored to this one
	// so far; written by the receiving executor only.
	ackVal uint64
	// trace is the tuple's place in its traced root's trace (trace.go),
	// nil when no root of it is traced (all but about one in
	// Config.TraceEvery). Immutable after the emitter set it.
	trace *tupleTrace
}

type tupleState uint8

const (
	tupleLive tupleState = iota
	tupleAcked
	tupleFailed
)

// anchor ties a tuple to one root's tree: the root, the tuple's edge id in
// it, and what bolts need to know about the root.
type anchor struct {
	root    uint64
	edge    uint64
	born    int64  // the root's emit time on the engine clock, ns (RESET's cap)
	spout   uint32 // the root's spout task, as numbered for the acker
	attempt uint32 // the root's attempt number, from 1
}

// anchorSet is a tuple's anchors: one inline (the common case, a tree of
// one root), more in a slice (a tuple joined to several trees).
type anchorSet struct {
	one  anchor
	more []anchor // when len(more) > 0 it holds all of them, one unused
	n    int32
}

func (s *anchorSet) len() int { return int(s.n) }

func (s *anchorSet) at(i int) *anchor {
	if s.n == 1 {
		return &s.one
	}
	return &s.more[i]
}

// putXor adds edge e for a's root: XORed into the entry for that root if
// the set has one (two anchors of one tree), appended otherwise.
func (s *anchorSet) putXor(a *anchor, e uint64) {
	for i := 0; i < int(s.n); i++ {
		if b := s.at(i); b.root == a.root {
			b.edge ^= e
			return
		}
	}
	c := *a
	c.edge = e
	switch s.n {
	case 0:
		s.one = c
	case 1:
		s.more = append(make([]anchor, 0, 4), s.one, c)
	default:
		s.more = append(s.more, c)
	}
	s.n++
}

// Values returns the tuple's values, in the order of its stream's fields.
// Do not modify them.
func (t *Tuple) Values() []any { return t.values }

// Value returns value i.
func (t *Tuple) Value(i int) any { return t.values[i] }

// String returns value i as a string (empty if it is not one).
func (t *Tuple) String(i int) string {
	s, _ := t.values[i].(string)
	return s
}

// Int returns value i as an int (0 if it is not one).
func (t *Tuple) Int(i int) int {
	n, _ := t.values[i].(int)
	return n
}

// Stream is the name of the stream the tuple came on.
func (t *Tuple) Stream() string { return t.stream.name }

// Source is the name of the component that emitted the tuple.
func (t *Tuple) Source() string { return t.stream.comp.name }

// Attempt is the attempt number of the tuple's root (the highest, for a
// tuple joined to several trees): 1 for a first emit, more for a replay;
// 0 for an untracked tuple.
func (t *Tuple) Attempt() int { return int(t.attempt) }

func (t *Tuple) describe() string {
	return fmt.Sprintf("tuple from %s:%s (task %d) to task %d", t.stream.comp.name, t.stream.name, t.srcTask, t.dstTask)
}

// idGen draws edge and root ids: wyrand (a 64-bit multiply-mix of a
// Weyl sequence), one per executor, about a nanosecond a draw. Never 0.
type idGen struct{ s uint64 }

func (g *idGen) next() uint64 {
	for {
		g.s += 0xa0761d6478bd642f
		hi, lo := bits.Mul64(g.s, g.s^0xe7037ed1a0b428db)
		if v := hi ^ lo; v != 0 {
			return v
		}
	}
}

// float returns a uniform float in [0, 1).
func (g *idGen) float() float64 { return float64(g.next()>>11) / (1 << 53) }
