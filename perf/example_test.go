package perf_test

import (
	"errors"
	"fmt"
	"slices"

	"github.com/xorack/xorack/perf"
)

// A Group counts one phase of work on the calling thread; a count the machine cannot make reads n/a, never 0.
func Example() {
	// Unknown, printed "n/a", unless measured. Open fails only where nothing
	// per-thread can be measured (not Linux); it locks this goroutine to its
	// thread until Close, and perf.Probe().Note() says what this machine counts and why.
	var taskClock perf.Value
	if g, err := perf.Open(perf.TaskClock); err == nil {
		defer g.Close()
		before, err1 := g.Read()
		g.Start()
		xs := make([]int, 10_000)
		for i := range xs {
			xs[i] = i * 7919 % len(xs)
		}
		slices.Sort(xs)
		g.Stop()
		after, err2 := g.Read()
		if err := errors.Join(err1, err2); err != nil {
			fmt.Println(err)
			return
		}
		taskClock = after.Sub(before).Get(perf.TaskClock) // the phase's CPU time in ns
	}
	// A report prints taskClock.FormatPerOp(ops): the count per operation, or n/a.
	fmt.Println("known exactly where available:", taskClock.OK == perf.Probe().Available(perf.TaskClock))
	// Output: known exactly where available: true
}

// FormatPerOp renders a count per operation for a table, with three significant digits.
func ExampleValue_FormatPerOp() {
	cycles := perf.Value{N: 1_520_873, OK: true}
	fmt.Println(cycles.FormatPerOp(10_000))
	fmt.Println(cycles.FormatPerOp(1_000_000))
	fmt.Println(perf.Value{}.FormatPerOp(1000)) // unknown: the machine could not count it
	// Output:
	// 152
	// 1.52
	// n/a
}
