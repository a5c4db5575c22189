package workload_test

import (
	"fmt"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/acktest/workload"
)

// ExampleBuild builds a word-count stream with about 1000 roots in flight
// and replays it once on a shard: every tree completes, none fails.
func ExampleBuild() {
	st := workload.Build(workload.WordCount, 1000, 1)
	fmt.Println("messages per root:", st.K, "slots:", st.Slots, "pending:", st.Pending, "peak:", st.Peak)
	fmt.Println("prefix:", len(st.Prefix), "cycle:", len(st.Cycle))

	s, err := ackcore.NewShard(ackcore.Config{MaxPending: st.MaxPending(), Clock: &ackcore.FakeClock{}})
	if err != nil {
		panic(err)
	}
	out := s.Apply(st.Prefix, nil)
	out = s.Apply(st.Cycle, out)
	stats := s.Stats()
	fmt.Println("outcomes:", len(out), "completed:", stats.Completed, "failed:", stats.Failed(), "pending:", s.Pending())
	// Output:
	// messages per root: 10 slots: 1112 pending: 1000 peak: 1015
	// prefix: 6124 cycle: 11120
	// outcomes: 1224 completed: 1224 failed: 0 pending: 1000
}

// ExampleByName looks shapes up by the names the benchmarks take.
func ExampleByName() {
	for _, name := range []string{"wordcount", "tree8x8", "chain4", "diamond2", "tree9x9"} {
		sh, err := workload.ByName(name)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(sh.Name, sh.Messages())
	}
	// Output:
	// wordcount 10
	// tree8x8 73
	// chain4 5
	// diamond2 8
	// workload: unknown shape "tree9x9" (want wordcount, tree8x8, chainN or diamondN with N in 1..1000)
}
