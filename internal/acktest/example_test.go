package acktest_test

import (
	"fmt"
	"testing"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/acktest"
)

// exampleTB is the least testing.TB that Run needs outside a test: it
// panics on the first failure. In a test, pass the test's t instead.
type exampleTB struct{ testing.TB }

func (exampleTB) Helper()                           {}
func (exampleTB) Failed() bool                      { return false }
func (exampleTB) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (exampleTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// ExampleRun holds ackcore's Shard to the reference model on a shuffled,
// lossy stream with a fixed seed, then prints the shard's counters.
func ExampleRun() {
	var shard *ackcore.Shard
	newShard := func(cfg ackcore.Config) (ackcore.Interface, error) {
		s, err := ackcore.NewShard(cfg)
		shard = s
		return s, err
	}
	sc := acktest.Scenario{Seed: 1, Roots: 200, MaxPending: 64, Window: 50, Drop: 0.02, MaxBatch: 16}
	acktest.Run(exampleTB{}, sc, newShard) // in a test: acktest.Run(t, sc, newShard)

	st := shard.Stats()
	fmt.Println("inits:", st.Inits, "completed:", st.Completed, "pending:", st.Pending)
	fmt.Println("failed:", st.FailedExplicit, "explicit,", st.FailedTimeout, "timeout,", st.FailedFull, "full")
	fmt.Println("orphans evicted at the bound:", st.OrphansEvicted)
	// Output:
	// inits: 197 completed: 46 pending: 0
	// failed: 11 explicit, 134 timeout, 6 full
	// orphans evicted at the bound: 1349
}

// ExampleInvalidMsgs shows that a shard refuses every malformed message
// as invalid and keeps nothing, as every acker must.
func ExampleInvalidMsgs() {
	s, err := ackcore.NewShard(ackcore.Config{MaxPending: 16, Clock: &ackcore.FakeClock{}})
	if err != nil {
		panic(err)
	}
	msgs := acktest.InvalidMsgs()
	for i, o := range s.Apply(msgs, nil) {
		fmt.Printf("%v: %v %v\n", msgs[i].Validate(), o.Kind, o.Reason)
	}
	st := s.Stats()
	fmt.Println("refused invalid:", st.RefusedInvalid, "pending:", st.Pending)
	// Output:
	// ackcore: ACK with root 0 (root ids are never 0): refused invalid
	// ackcore: root 0x1: unknown message kind 0: refused invalid
	// ackcore: root 0x1: unknown message kind 9: refused invalid
	// ackcore: INIT root 0x1: task 1048576 exceeds MaxTask 1048575: refused invalid
	// ackcore: RESET root 0x1: timeout 90000000 ms exceeds 24h0m0s: refused invalid
	// refused invalid: 5 pending: 0
}

// ExampleCases lists the standard scenarios RunCases runs, as they read
// in failure messages with seed 1.
func ExampleCases() {
	for _, c := range acktest.Cases() {
		c.Seed = 1
		fmt.Printf("%s: %v\n", c.Name, c.Scenario)
	}
	// Output:
	// clean-inorder: seed=1 roots=300 maxPending=4096 window=0 dup=0 drop=0 maxBatch=32 jump=0
	// shuffled: seed=1 roots=300 maxPending=4096 window=200 dup=0 drop=0 maxBatch=64 jump=0
	// faults: seed=1 roots=300 maxPending=4096 window=100 dup=0.02 drop=0.02 maxBatch=64 jump=0.02
	// timeouts: seed=1 roots=200 maxPending=4096 window=50 dup=0 drop=0.05 maxBatch=8 jump=0.1
	// tight-bound: seed=1 roots=300 maxPending=20 window=300 dup=0 drop=0.02 maxBatch=16 jump=0.05
	// tiny-bound: seed=1 roots=100 maxPending=1 window=20 dup=0 drop=0 maxBatch=4 jump=0.05
	// owners: seed=1 roots=300 maxPending=64 window=200 dup=0.02 drop=0.03 maxBatch=16 jump=0.05 owners=3 orphanShare=20
	// owners-tight: seed=1 roots=200 maxPending=12 window=100 dup=0 drop=0.02 maxBatch=8 jump=0.05 owners=5 orphanShare=4
	// drains: seed=1 roots=300 maxPending=4096 window=100 dup=0.01 drop=0.01 maxBatch=32 jump=0.02 drains
	// drains-tight: seed=1 roots=300 maxPending=24 window=150 dup=0 drop=0.02 maxBatch=16 jump=0.05 owners=3 orphanShare=6 drains
}

// keeping is the newShard of ExampleRun: it makes ackcore shards and
// keeps the last one in *kept, for the example to print its counters.
func keeping(kept **ackcore.Shard) func(ackcore.Config) (ackcore.Interface, error) {
	return func(cfg ackcore.Config) (ackcore.Interface, error) {
		s, err := ackcore.NewShard(cfg)
		*kept = s
		return s, err
	}
}

// ExampleScenario_drains holds the shard to the model on fails after
// fan-out whose FAILs carry the failed tuple's ack val: each failed tree
// leaves a drain, which its children's late ACKs empty, so the table
// holds nothing of it once they are in (a drain whose tree outlives the
// scenario's 20 ms timeout expires as an orphan instead).
func ExampleScenario_drains() {
	var shard *ackcore.Shard
	sc := acktest.Scenario{Seed: 1, Roots: 300, MaxPending: 4096, Window: 20, MaxBatch: 256, Drains: true}
	acktest.Run(exampleTB{}, sc, keeping(&shard))

	st := shard.Stats()
	fmt.Println("failed:", st.FailedExplicit, "drained:", st.OrphansDrained, "expired:", st.Orphans, "pending:", st.Pending)
	// Output:
	// failed: 164 drained: 104 expired: 141 pending: 0
}
