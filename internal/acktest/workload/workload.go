// Package workload builds the message streams the benchmarks replay: trees
// of a fixed shape, interleaved so that a chosen number of roots is pending
// at every moment, as a cycle that can be replayed forever.
//
// # Layout of a stream
//
// S slots each run one tree of k messages at a time. The cycle is k rounds;
// in each round every slot emits its next message, slots in a fresh random
// order per round. Slot i is phase-shifted by i mod k rounds, so in every
// round 1/k of the slots finish a tree and 1/k start one, and the number of
// pending roots stays at S*(k-1)/k give or take a few. Slot i's tree keeps
// its root and edge ids from cycle to cycle: its last messages open the
// next cycle, so replaying the cycle end to end is one endless steady
// stream. Prefix (the head of every slot's first tree) must be applied once
// before the first cycle; without it the tails that open the cycle would
// arrive before their INITs and the stream would fall into lockstep.
//
// Messages of one tree come in causal order (INIT first), those of
// different trees interleaved at random: a root's messages are about S
// messages apart, as in a busy topology with S roots in flight.
//
// The package is internal: only the repository's tests and benchmarks use
// it (see package acktest).
package workload

import (
	"fmt"
	"math/rand/v2"

	"github.com/xorack/xorack/ackcore"
)

// Shape is a tree shape.
type Shape struct {
	Name string
	// Fanout per level below the spout: {8} is word count (the spout emits
	// one tuple, a splitter anchors 8 words to it), {8, 8} a two-level
	// tree whose spout emits 8 tuples that each anchor 8.
	spoutEdges int
	levels     []int
	chain      int // >0: a chain of this depth instead of a tree
	diamond    int // >0: this many diamonds (join of two anchors) in a row
}

var (
	// WordCount: 1 spout edge, a splitter anchoring 8 words: 10 messages.
	WordCount = Shape{Name: "wordcount", spoutEdges: 1, levels: []int{8}}
	// Tree8x8: 8 spout edges, each anchoring 8: 73 messages.
	Tree8x8 = Shape{Name: "tree8x8", spoutEdges: 8, levels: []int{8}}
)

// Chain is a chain of depth d (d+1 messages).
func Chain(d int) Shape { return Shape{Name: fmt.Sprintf("chain%d", d), chain: d} }

// Diamonds is n diamonds in a row: each stage emits two tuples that are
// both anchors of one joined tuple (a DAG with multi-anchored joins).
func Diamonds(n int) Shape { return Shape{Name: fmt.Sprintf("diamond%d", n), diamond: n} }

// ByName finds a shape: wordcount, tree8x8, chainN, diamondN.
func ByName(name string) (Shape, error) {
	switch name {
	case "wordcount":
		return WordCount, nil
	case "tree8x8":
		return Tree8x8, nil
	}
	var n int
	if _, err := fmt.Sscanf(name, "chain%d", &n); err == nil && n > 0 && n <= 1000 {
		return Chain(n), nil
	}
	if _, err := fmt.Sscanf(name, "diamond%d", &n); err == nil && n > 0 && n <= 1000 {
		return Diamonds(n), nil
	}
	return Shape{}, fmt.Errorf("workload: unknown shape %q (want wordcount, tree8x8, chainN or diamondN with N in 1..1000)", name)
}

// Messages is the number of messages per root.
func (s Shape) Messages() int { return len(s.tree(rand.New(rand.NewPCG(1, 2)), 1, 0)) }

// tree returns the messages of one root in causal order.
func (s Shape) tree(rng *rand.Rand, root uint64, task uint32) []ackcore.Msg {
	id := func() uint64 {
		for {
			if v := rng.Uint64(); v != 0 {
				return v
			}
		}
	}
	ack := func(v uint64) ackcore.Msg { return ackcore.Msg{Root: root, Kind: ackcore.Ack, Val: v} }
	switch {
	case s.chain > 0:
		e := id()
		msgs := []ackcore.Msg{{Root: root, Kind: ackcore.Init, Task: task, Val: e}}
		for i := 1; i < s.chain; i++ {
			n := id()
			msgs = append(msgs, ack(e^n))
			e = n
		}
		return append(msgs, ack(e))
	case s.diamond > 0:
		// Spout tuple t; t emits a, b; a and b both anchor j; j is the next t.
		t := id()
		msgs := []ackcore.Msg{{Root: root, Kind: ackcore.Init, Task: task, Val: t}}
		for i := 0; i < s.diamond; i++ {
			a, b, ja, jb := id(), id(), id(), id()
			msgs = append(msgs, ack(t^a^b), ack(a^ja), ack(b^jb))
			t = ja ^ jb // the joined tuple's ack val for this root
		}
		return append(msgs, ack(t))
	}
	var init uint64
	frontier := make([]uint64, s.spoutEdges)
	for i := range frontier {
		frontier[i] = id()
		init ^= frontier[i]
	}
	msgs := []ackcore.Msg{{Root: root, Kind: ackcore.Init, Task: task, Val: init}}
	for _, fan := range s.levels {
		var next []uint64
		for _, e := range frontier {
			v := e
			for j := 0; j < fan; j++ {
				c := id()
				v ^= c
				next = append(next, c)
			}
			msgs = append(msgs, ack(v))
		}
		frontier = next
	}
	for _, e := range frontier {
		msgs = append(msgs, ack(e))
	}
	return msgs
}

// Stream is a replayable message stream. See the package doc.
type Stream struct {
	Shape   Shape
	K       int           // messages per root
	Slots   int           // trees in flight
	Pending int           // roots pending in steady state, about Slots*(K-1)/K
	Peak    int           // the most roots pending at any point of the cycle
	Prefix  []ackcore.Msg // apply once, first
	Cycle   []ackcore.Msg // then replay end to end
	Roots   []uint64      // slot i's root id
}

// Tasks is the number of spout tasks roots are spread over.
const Tasks = 16

// Build makes a stream keeping about pending roots in flight.
func Build(shape Shape, pending int, seed uint64) *Stream {
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	k := shape.Messages()
	slots := pending
	if k > 1 {
		slots = (pending*k + k - 2) / (k - 1)
	}
	st := &Stream{Shape: shape, K: k, Slots: slots, Pending: pending, Roots: make([]uint64, slots)}
	trees := make([][]ackcore.Msg, slots)
	for i := range trees {
		r := rng.Uint64() | 1
		st.Roots[i] = r
		trees[i] = shape.tree(rng, r, uint32(i%Tasks))
	}
	st.Cycle = make([]ackcore.Msg, 0, slots*k)
	st.Prefix = make([]ackcore.Msg, 0, slots*(k+1)/2)
	perm := make([]int32, slots)
	for i := range perm {
		perm[i] = int32(i)
	}
	// Pending roots through one cycle after the prefix: slot i's root is
	// pending from its first message to its last; after the prefix, the
	// slots with a non-zero phase are mid-tree.
	n := 0
	for i := 0; i < slots; i++ {
		if i%k != 0 {
			n++
		}
	}
	st.Peak = n
	for r := 0; r < k; r++ {
		rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		for _, i := range perm {
			phase := int(i) % k
			j := (r - phase + k) % k
			st.Cycle = append(st.Cycle, trees[i][j])
			if r >= phase {
				st.Prefix = append(st.Prefix, trees[i][j])
			}
			if k > 1 {
				switch j {
				case 0:
					n++
				case k - 1:
					n--
				}
				st.Peak = max(st.Peak, n)
			}
		}
	}
	return st
}

// MaxPending is the tightest bound that the stream never exceeds.
func (st *Stream) MaxPending() int { return max(st.Peak, 1) }
