// Package sliceheap is container/heap's Interface over a slice, ordered by
// a function: the one adapter the packages that keep a heap share (the
// shard's oldest-pending listing, a spout's replay queues), so that none
// writes Len, Less, Swap, Push and Pop again. A leaf: it imports nothing
// of the project.
//
// # Layout
//
// Heap holds the elements in S, a binary heap in container/heap's order
// once heap.Init (or only heap.Push) has built it; S[0] is the least by
// Before.
//
// # Concurrency
//
// None of its own: a Heap belongs to one goroutine, like the slice it is.
//
// # Invariants
//
// Between container/heap's calls, S is a heap by Before: no element is
// Before its parent.
package sliceheap

// Heap is a heap.Interface over S. Before(a, b) reports whether a comes
// out first; set it before the first heap call.
type Heap[T any] struct {
	S      []T
	Before func(a, b T) bool
}

// Len is len(S).
func (h *Heap[T]) Len() int { return len(h.S) }

// Less reports whether S[i] is Before S[j].
func (h *Heap[T]) Less(i, j int) bool { return h.Before(h.S[i], h.S[j]) }

// Swap swaps S[i] and S[j].
func (h *Heap[T]) Swap(i, j int) { h.S[i], h.S[j] = h.S[j], h.S[i] }

// Push appends x, a T, to S; use heap.Push.
func (h *Heap[T]) Push(x any) { h.S = append(h.S, x.(T)) }

// Pop removes and returns S's last element; use heap.Pop.
func (h *Heap[T]) Pop() any {
	x := h.S[len(h.S)-1]
	h.S = h.S[:len(h.S)-1]
	return x
}
