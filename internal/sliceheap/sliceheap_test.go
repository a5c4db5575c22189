package sliceheap

import (
	"container/heap"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOrder: what is pushed comes out in Before's order, through Push,
// Init, Fix and Pop, for a min-heap and a max-heap.
func TestOrder(t *testing.T) {
	t.Run("min", func(t *testing.T) { checkOrder(t, func(a, b int) bool { return a < b }) })
	t.Run("max", func(t *testing.T) { checkOrder(t, func(a, b int) bool { return a > b }) })
}

func checkOrder(t *testing.T, before func(a, b int) bool) {
	rng := rand.New(rand.NewPCG(1, 2))
	var want []int
	h := &Heap[int]{Before: before}
	for range 500 {
		v := rng.IntN(100)
		want = append(want, v)
		heap.Push(h, v)
	}
	// Replace the top, as a bounded top-n does.
	top := h.S[0]
	h.S[0] = 50
	heap.Fix(h, 0)
	want[slices.Index(want, top)] = 50
	built := &Heap[int]{S: slices.Clone(want), Before: before}
	heap.Init(built)
	slices.SortStableFunc(want, func(a, b int) int {
		switch {
		case before(a, b):
			return -1
		case before(b, a):
			return 1
		}
		return 0
	})
	for _, h := range []*Heap[int]{h, built} {
		var got []int
		for h.Len() > 0 {
			got = append(got, heap.Pop(h).(int))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("popped %v, want %v", got, want)
		}
	}
}
