package ring_test

import (
	"fmt"
	"sync"

	"github.com/xorack/xorack/ring"
)

// One producer goroutine pushes into a ring and closes it; the consumer pops until it is closed and empty.
func ExampleNew() {
	r := ring.New[int](4) // the capacity must be a power of two
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 1; i <= 10; i++ {
			r.Push(i * i) // waits while the ring is full
		}
		r.Close() // everything pushed before Close is still delivered
	})

	sum := 0
	for {
		v, ok := r.Pop() // waits while the ring is empty; false once closed and empty
		if !ok {
			break
		}
		sum += v
	}
	wg.Wait()
	fmt.Println(sum, r.Len())
	// Output: 385 0
}

// Reserve and Commit fill slots in place, Peek and Release read them in place, and a span never wraps.
func ExampleSPSC_Reserve() {
	r := ring.New[int](8)
	next := 0
	produce := func(n int) {
		span := r.Reserve(n) // at most n free slots, contiguous in the buffer
		for i := range span {
			span[i] = next
			next++
		}
		r.Commit(len(span)) // one compare-and-swap of tail publishes the whole span
		fmt.Println("reserved", len(span))
	}
	consume := func(n int) {
		items := r.Peek(n) // at most n published elements, contiguous in the buffer
		fmt.Println("peeked", items)
		r.Release(len(items)) // items must not be used after Release
	}

	produce(6)
	consume(4)
	produce(6) // six slots are free, but only two before the buffer's end
	produce(6) // the other four are at its start
	consume(8)
	consume(8)
	// Output:
	// reserved 6
	// peeked [0 1 2 3]
	// reserved 2
	// reserved 4
	// peeked [4 5 6 7]
	// peeked [8 9 10 11]
}

// Three producers each push into their own ring of a FanIn; one consumer drains them all until Close.
func ExampleFanIn() {
	f := ring.NewFanIn[int](3, 4, 2, ring.DefaultIdle()) // 3 rings of 4 slots, at most 2 taken from a ring per pass
	var producers sync.WaitGroup
	for p := range f.Producers() {
		producers.Go(func() {
			r := f.Producer(p) // producer p uses its own ring and nothing else
			for i := range 5 {
				r.Push(10*p + i)
			}
		})
	}
	var closer sync.WaitGroup
	closer.Go(func() {
		producers.Wait()
		f.Close() // the consumer still gets every element pushed before Close
	})

	got := make([][]int, f.Producers())
	for f.DrainWait(func(p int, items []int) { got[p] = append(got[p], items...) }) > 0 {
	}
	closer.Wait()
	for p, items := range got { // rings interleave, but each keeps its order
		fmt.Println(p, items)
	}
	// Output:
	// 0 [0 1 2 3 4]
	// 1 [10 11 12 13 14]
	// 2 [20 21 22 23 24]
}
