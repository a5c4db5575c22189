package baseline_test

import (
	"fmt"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/bench/internal/baseline"
)

// GoMap reports the shard's outcomes: a root completed (its ACK before its INIT) and one timed out.
func ExampleGoMap() {
	clock := &ackcore.FakeClock{}
	g, err := baseline.NewGoMap(baseline.Config{MaxPending: 100, Timeout: time.Second, Clock: clock})
	if err != nil {
		panic(err)
	}
	const e1, e2 = 0x11, 0x22 // edge ids: random, never 0, in real use
	out := g.Apply([]ackcore.Msg{
		{Root: 7, Kind: ackcore.Ack, Val: e1 ^ e2}, // a bolt's ACK may overtake the INIT
		{Root: 8, Kind: ackcore.Init, Task: 4, Val: e1},
	}, nil)
	out = g.Apply([]ackcore.Msg{
		{Root: 7, Kind: ackcore.Init, Task: 3, Val: e1 ^ e2}, // root 7's tree is now complete
	}, out)
	clock.Add(2 * time.Second)
	exp := make([]ackcore.Outcome, 0, 16)
	for more := true; more; {
		exp, more = g.Expire(exp[:0])
		out = append(out, exp...)
	}
	for _, o := range out {
		fmt.Printf("root %d task %d: %v %v\n", o.Root, o.Task, o.Kind, o.Reason)
	}
	st := g.Stats()
	fmt.Printf("completed %d, timed out %d, pending %d, verify: %v\n", st.Completed, st.FailedTimeout, st.Pending, g.Verify())
	// Output:
	// root 7 task 3: completed none
	// root 8 task 4: failed timeout
	// completed 1, timed out 1, pending 0, verify: <nil>
}

// Storm drops an unfinished root silently when its bucket rotates out, reporting no timeout.
func ExampleStorm() {
	clock := &ackcore.FakeClock{}
	s, err := baseline.NewStorm(baseline.Config{MaxPending: 100, Timeout: time.Second, Clock: clock}, baseline.StormOptions{})
	if err != nil {
		panic(err)
	}
	out := s.Apply([]ackcore.Msg{
		{Root: 7, Kind: ackcore.Init, Task: 3, Val: 0x11},
		{Root: 7, Kind: ackcore.Ack, Val: 0x11}, // completes
		{Root: 8, Kind: ackcore.Init, Task: 4, Val: 0x22},
	}, nil)
	clock.Add(3 * time.Second) // three rotations: root 8's bucket is dropped
	out, _ = s.Expire(out)
	for _, o := range out {
		fmt.Printf("root %d task %d: %v\n", o.Root, o.Task, o.Kind)
	}
	fmt.Printf("dropped with INIT: %d, pending: %d\n", s.DroppedInit(), s.Stats().Pending)
	// Output:
	// root 7 task 3: completed
	// dropped with INIT: 1, pending: 0
}
