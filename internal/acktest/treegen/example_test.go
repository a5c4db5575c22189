package treegen_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/acktest/treegen"
)

// ExampleGenerate generates the messages of 20 random trees with a fixed
// seed, counts them by kind and checks that each Val is the XOR of its IDs.
func ExampleGenerate() {
	rng := rand.New(rand.NewPCG(1, 2))
	evs, roots := treegen.Generate(rng, treegen.Options{
		Roots: 20, MaxFanout: 3, MaxDepth: 3, JoinProb: 0.2,
		FailProb: 0.05, ResetProb: 0.05, Tasks: 4,
	})

	count := map[ackcore.Kind]int{}
	xorOK := true
	for _, e := range evs {
		count[e.Msg.Kind]++
		var v uint64
		for _, id := range e.IDs {
			v ^= id
		}
		xorOK = xorOK && v == e.Msg.Val
	}
	fmt.Println("roots:", len(roots), "messages:", len(evs), "first:", evs[0].Msg.Kind)
	for _, k := range []ackcore.Kind{ackcore.Init, ackcore.Ack, ackcore.Fail, ackcore.Reset} {
		fmt.Printf("%v: %d\n", k, count[k])
	}
	fmt.Println("every Val is the XOR of its IDs:", xorOK)
	// Output:
	// roots: 20 messages: 375 first: INIT
	// INIT: 20
	// ACK: 316
	// FAIL: 20
	// RESET: 19
	// every Val is the XOR of its IDs: true
}

// ExampleFaults shuffles a generated stream within a window of 8,
// duplicating and dropping about one message in ten.
func ExampleFaults() {
	rng := rand.New(rand.NewPCG(1, 2))
	evs, _ := treegen.Generate(rng, treegen.Options{Roots: 10, MaxFanout: 2, MaxDepth: 2})
	faulty, dropped := treegen.Faults(rng, evs, 8, 0.1, 0.1)
	fmt.Println("generated:", len(evs), "delivered:", len(faulty))
	fmt.Println("dropped:", dropped, "duplicated:", len(faulty)-(len(evs)-dropped))
	// Output:
	// generated: 48 delivered: 51
	// dropped: 2 duplicated: 5
}
