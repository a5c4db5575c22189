package model_test

import (
	"fmt"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/acktest/model"
)

// ExampleModel_Apply tracks one tuple tree: the spout emits edges 10 and
// 20, the tuple on 20 anchors a child on 30, and the last ACK completes it.
func ExampleModel_Apply() {
	m := model.New(100, 30*time.Second, time.Millisecond)
	const root = 7
	steps := []struct {
		at  time.Duration
		msg ackcore.Msg
		ids []uint64
	}{
		{0, ackcore.Msg{Root: root, Kind: ackcore.Init, Task: 3, Val: 10 ^ 20}, []uint64{10, 20}},
		{2 * time.Millisecond, ackcore.Msg{Root: root, Kind: ackcore.Ack, Val: 10}, []uint64{10}},
		{4 * time.Millisecond, ackcore.Msg{Root: root, Kind: ackcore.Ack, Val: 20 ^ 30}, []uint64{20, 30}},
		{9 * time.Millisecond, ackcore.Msg{Root: root, Kind: ackcore.Ack, Val: 30}, []uint64{30}},
	}
	for _, s := range steps {
		if o, ok := m.Apply(s.at, s.msg, s.ids); ok {
			fmt.Printf("%v: %v root %d task %d after %v\n", s.msg.Kind, o.Kind, o.Root, o.Task, o.Latency)
		} else {
			fmt.Printf("%v: pending=%v\n", s.msg.Kind, m.Pending(root))
		}
	}
	// Output:
	// INIT: pending=true
	// ACK: pending=true
	// ACK: pending=true
	// ACK: completed root 7 task 3 after 9ms
}

// ExampleModel_Expire lets a root time out and an entry that never saw
// its INIT expire silently as an orphan, then prints the counters.
func ExampleModel_Expire() {
	m := model.New(100, 20*time.Millisecond, time.Millisecond)
	m.Apply(0, ackcore.Msg{Root: 1, Kind: ackcore.Init, Task: 2, Val: 5}, []uint64{5})
	m.Apply(time.Millisecond, ackcore.Msg{Root: 2, Kind: ackcore.Ack, Val: 6}, []uint64{6}) // no INIT yet

	next, _ := m.NextDeadline()
	fmt.Println("next deadline:", next)
	fmt.Println("at 19ms:", m.Expire(19*time.Millisecond))
	for _, o := range m.Expire(20 * time.Millisecond) {
		fmt.Println("at 20ms:", o.Kind, o.Reason, "root", o.Root, "after", o.Latency)
	}
	fmt.Println("at 21ms:", m.Expire(21*time.Millisecond), "pending root 2:", m.Pending(2))
	st := m.Stats()
	fmt.Println("timeouts:", st.FailedTimeout, "orphans:", st.Orphans, "pending:", st.Pending)
	// Output:
	// next deadline: 20ms
	// at 19ms: []
	// at 20ms: failed timeout root 1 after 20ms
	// at 21ms: [] pending root 2: false
	// timeouts: 1 orphans: 1 pending: 0
}
