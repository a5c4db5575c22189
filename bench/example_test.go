package bench_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/xorack/xorack/bench"
)

// A tiny verified core-level run of xorack against the Go-map baseline (rates vary, so only verification is printed).
func ExampleRun() {
	rep, err := bench.Run(bench.Config{
		Levels:  []bench.Level{bench.LevelCore},
		Impls:   []string{bench.Reference, bench.GoMapName},
		Pending: []int{200},
		Msgs:    4000,
		Reps:    1,
		NoPin:   true,
		Quick:   true, // a short stall probe before the rows
	})
	if errors.Is(err, bench.ErrVerification) {
		fmt.Println("verification failed:", err)
	} else if err != nil {
		panic(err)
	}
	for _, r := range rep.Rows {
		fmt.Printf("%s: verified %v, every root completed %v\n", r.Name(), r.Verified, r.Roots > 0 && r.Completed == r.Roots)
	}
	// Output:
	// level=core/impl=xorack/shape=wordcount/P=200: verified true, every root completed true
	// level=core/impl=gomap/shape=wordcount/P=200: verified true, every root completed true
}

// Validate names the first bad value of a configuration before anything is built.
func ExampleConfig_Validate() {
	for _, c := range []bench.Config{
		{Quick: true},
		{Duration: time.Second, Msgs: 1000},
		{Pending: []int{3}, Producers: 4},
		{FailRate: 0.1, Impls: []string{"limit"}},
	} {
		fmt.Println(c.Validate())
	}
	// Output:
	// <nil>
	// bench: both Config.Duration 1s and Msgs 1000 given; choose one
	// bench: Config.Pending 3 is smaller than Producers 4 (each producer needs trees of its own)
	// bench: Config.Impls: impl "limit" cannot run with fail or drop rates (it has no FAIL or timeout handling)
}
