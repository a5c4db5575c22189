package ackcore_test

import (
	"fmt"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// A root whose tree completes, and one that times out: one shard, driven by
// a fake clock.
func Example() {
	clock := &ackcore.FakeClock{}
	s, err := ackcore.NewShard(ackcore.Config{MaxPending: 1000, Timeout: 30 * time.Second, Clock: clock})
	if err != nil {
		panic(err)
	}
	const e1, e2, c1 = 0x11, 0x22, 0x33 // edge ids: random, never 0, in real use
	out := s.Apply([]ackcore.Msg{
		{Root: 7, Kind: ackcore.Init, Task: 3, Val: e1 ^ e2}, // the spout emitted two tuples
		{Root: 7, Kind: ackcore.Ack, Val: e1 ^ c1},           // a bolt acked e1, anchoring c1 to it
		{Root: 8, Kind: ackcore.Init, Task: 4, Val: e1, TimeoutMs: 500},
	}, nil)
	clock.Add(2 * time.Millisecond)
	out = s.Apply([]ackcore.Msg{
		{Root: 7, Kind: ackcore.Ack, Val: e2},
		{Root: 7, Kind: ackcore.Ack, Val: c1}, // the last edge: root 7 completes
	}, out)
	clock.Add(time.Second)
	exp := make([]ackcore.Outcome, 0, 64) // Expire writes at most the room it is given
	for more := true; more; {             // and does a bounded slice of work per call
		exp, more = s.Expire(exp[:0])
		out = append(out, exp...)
	}
	for _, o := range out {
		fmt.Printf("root %d task %d: %v %v after %v\n", o.Root, o.Task, o.Kind, o.Reason, o.Latency)
	}
	// Output:
	// root 7 task 3: completed none after 2.5ms
	// root 8 task 4: failed timeout after 1.0025s
}

// The memory a bound needs is known, and checked against a budget, before
// anything is allocated.
func ExampleConfig_Bytes() {
	c := ackcore.Config{MaxPending: 100_000_000, MaxBytes: 4 << 30}
	fmt.Println(c.Bytes() > c.MaxBytes, c.Validate() != nil)
	// Output:
	// true true
}

// With ProgressTimeout a tree acked more slowly than its timeout allows in
// all, but acked every half timeout, does not time out; its latency still
// runs from its INIT.
func ExampleConfig_progressTimeout() {
	clock := &ackcore.FakeClock{}
	s, err := ackcore.NewShard(ackcore.Config{MaxPending: 1000, Timeout: time.Second, Clock: clock, ProgressTimeout: true})
	if err != nil {
		panic(err)
	}
	s.Apply([]ackcore.Msg{{Root: 9, Kind: ackcore.Init, Task: 1, Val: 1 | 2 | 4 | 8}}, nil) // four tuples
	for _, edge := range []uint64{1, 2, 4, 8} {
		clock.Add(500 * time.Millisecond) // a slow bolt: one ack every 500 ms, 2 s in all
		expired, _ := s.Expire(make([]ackcore.Outcome, 0, 8))
		fmt.Println("timed out:", len(expired))
		for _, o := range s.Apply([]ackcore.Msg{{Root: 9, Kind: ackcore.Ack, Val: edge}}, nil) {
			fmt.Println(o.Kind, "after", o.Latency.Round(10*time.Millisecond))
		}
	}
	// Output:
	// timed out: 0
	// timed out: 0
	// timed out: 0
	// timed out: 0
	// completed after 2s
}

// At the bound, entries made by ACKs for roots the shard does not know
// (late ACKs of failed trees) give way to new INITs, oldest first.
func ExampleStats_orphansEvicted() {
	s, err := ackcore.NewShard(ackcore.Config{MaxPending: 2})
	if err != nil {
		panic(err)
	}
	s.Apply([]ackcore.Msg{
		{Root: 1, Kind: ackcore.Ack, Val: 5}, // a late ACK: root 1 already failed
		{Root: 2, Kind: ackcore.Ack, Val: 6}, // another: the table is at its bound
	}, nil)
	out := s.Apply([]ackcore.Msg{{Root: 3, Kind: ackcore.Init, Task: 0, Val: 7}}, nil)
	st := s.Stats()
	fmt.Println("INIT refused:", len(out) > 0, "pending:", st.Pending, "orphans evicted:", st.OrphansEvicted)
	// Output:
	// INIT refused: false pending: 2 orphans evicted: 1
}

// A bolt that fails its input after anchoring children to it sends the
// FAIL with the val its ACK would have carried: the root is reported
// Failed at once, and what the tree still owes stays as a drain, which the
// children's late ACKs empty. Nothing of the tree is left behind; a FAIL
// without a val would have left the late ACKs an orphan to wait out its
// timeout.
func ExampleStats_orphansDrained() {
	s, err := ackcore.NewShard(ackcore.Config{MaxPending: 1000})
	if err != nil {
		panic(err)
	}
	const e1, c1, c2 = 0x11, 0x33, 0x44 // edge ids
	out := s.Apply([]ackcore.Msg{
		{Root: 7, Kind: ackcore.Init, Task: 2, Val: e1},  // the spout emitted e1
		{Root: 7, Kind: ackcore.Fail, Val: e1 ^ c1 ^ c2}, // its bolt anchored c1 and c2 to it, then failed it
		{Root: 7, Kind: ackcore.Ack, Val: c1},            // c1 is done
	}, nil)
	fmt.Println(out[0].Kind, out[0].Reason, "task", out[0].Task, "pending:", s.Stats().Pending)
	s.Apply([]ackcore.Msg{{Root: 7, Kind: ackcore.Ack, Val: c2}}, nil) // the last of the tree
	st := s.Stats()
	fmt.Println("pending:", st.Pending, "drained:", st.OrphansDrained)
	// Output:
	// failed explicit task 2 pending: 1
	// pending: 0 drained: 1
}
