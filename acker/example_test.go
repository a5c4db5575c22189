package acker_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// A spout task emits a root with two edges; a bolt acks both; the
// spout's receiver gets the root's outcome.
func Example() {
	a, err := acker.New(acker.Config{Shards: 2, Spec: acker.Spec{Producers: 1, Tasks: 1}, Shard: ackcore.Config{MaxPending: 1024}})
	if err != nil {
		panic(err)
	}
	if err := a.Start(); err != nil {
		panic(err)
	}
	p := a.Sender(0)
	const root, e1, e2 = 0x1234, 0x51, 0x7a
	p.Send(ackcore.Msg{Root: root, Kind: ackcore.Init, Task: 0, Val: e1 ^ e2})
	p.Send(ackcore.Msg{Root: root, Kind: ackcore.Ack, Val: e1})
	p.Send(ackcore.Msg{Root: root, Kind: ackcore.Ack, Val: e2})
	p.Flush()

	outs, _ := a.Inbox(a.ReceiverOf(0)).Wait(nil)
	fmt.Printf("root %#x: %v\n", outs[0].Root, outs[0].Kind)
	st := a.Stop()
	fmt.Println("completed:", st.Completed, "pending:", st.Pending)
	// Output:
	// root 0x1234: completed
	// completed: 1 pending: 0
}

// mustStart builds and starts an acker, as Example does.
func mustStart(cfg acker.Config) *acker.Acker {
	a, err := acker.New(cfg)
	if err != nil {
		panic(err)
	}
	if err := a.Start(); err != nil {
		panic(err)
	}
	return a
}

// A spout executor that emits and takes its own acks sends its INITs with
// TrySend and polls its receiver while TrySend says no: a shard holding
// back its INITs (its receiver fell Backlog behind) waits for exactly
// those polls, so a blocking Send here could wait forever. It gives up at
// a deadline rather than spin without end if the outcomes never come.
func ExampleProducer_TrySend() {
	a := mustStart(acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 1}, OutcomeRingSize: 16, Backlog: 8,
		Shard: ackcore.Config{MaxPending: 1024}})
	p, in := a.Sender(0), a.Inbox(0)
	deadline := time.Now().Add(time.Minute)
	var buf []ackcore.Outcome
	done := 0
	for root := uint64(1); root <= 1000; root++ {
		for {
			ok, err := p.TrySend(ackcore.Msg{Root: root, Kind: ackcore.Init, Val: root})
			if err != nil {
				panic(err)
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				panic(fmt.Sprintf("root %d: INIT held back for a minute", root))
			}
			p.Flush()
			buf = in.Poll(buf[:0]) // take acks: this is what releases the hold
			done += len(buf)
		}
		p.Send(ackcore.Msg{Root: root, Kind: ackcore.Ack, Val: root}) // ACKs are never held back
	}
	p.Flush()
	for done < 1000 && time.Now().Before(deadline) {
		buf, _ = in.WaitUntil(buf[:0], time.After(time.Until(deadline)))
		done += len(buf)
	}
	a.Stop()
	fmt.Println("completed:", done)
	// Output:
	// completed: 1000
}

// New checks every size against a memory budget before allocating.
func ExampleNew_budget() {
	_, err := acker.New(acker.Config{Shards: 1024, Spec: acker.Spec{Producers: 4096, Tasks: 1}, Shard: ackcore.Config{MaxPending: 1024}})
	fmt.Println(err != nil)
	a, err := acker.New(acker.Config{Shards: 2, Spec: acker.Spec{Producers: 2, Tasks: 4}, Shard: ackcore.Config{MaxPending: 1 << 16}})
	if err != nil {
		panic(err)
	}
	f := a.Footprint()
	fmt.Printf("rings %d KiB, outcome rings %d KiB\n", f.Rings>>10, f.OutcomeRings>>10)
	a.Stop()
	// Output:
	// true
	// rings 513 KiB, outcome rings 1026 KiB
}

// A receiver's Stats name a spout that stopped taking its outcomes.
func ExampleReceiver_Stats() {
	a := mustStart(acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 2}, OutcomeRingSize: 16, Backlog: 16,
		Shard: ackcore.Config{MaxPending: 1024}})
	p := a.Sender(0)
	// Nobody polls task 1's receiver: after 16 outcomes in its ring and 16
	// held, the shard holds back its INITs (within a minute, or never).
	deadline := time.Now().Add(time.Minute)
	for root := uint64(1); a.Inbox(1).(*acker.Receiver).Stats().HeldBack == 0 && time.Now().Before(deadline); {
		if ok, _ := p.TrySend(ackcore.Msg{Root: root, Kind: ackcore.Init, Task: 1}); ok {
			root++
		} else {
			runtime.Gosched() // let the executor drain the ring
		}
		p.Flush()
	}
	st := a.Inbox(1).(*acker.Receiver).Stats()
	fmt.Println("held back:", st.HeldBack > 0, "backlog ≥ 32:", st.Backlog >= 32, "taken:", st.Taken)
	go a.Inbox(1).(*acker.Receiver).Run(func(ackcore.Outcome) {})
	a.Stop()
	// Output:
	// held back: true backlog ≥ 32: true taken: 0
}

// A producer that sent without a Flush is named by Stop with how many of
// its messages were never applied, and NotApplied counts them: none is
// lost without a word.
func ExampleUnflushedProducer() {
	a := mustStart(acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 1}, Batch: 64, Shard: ackcore.Config{MaxPending: 100}})
	p := a.Sender(0)
	for r := uint64(1); r <= 3; r++ {
		_ = p.Send(ackcore.Msg{Root: r, Kind: ackcore.Init, Val: r}) // staged: Batch 64 not reached
	}
	go a.Inbox(a.ReceiverOf(0)).(*acker.Receiver).Run(func(ackcore.Outcome) {})
	_, err := a.StopContext(context.Background())
	fmt.Println(err)
	fmt.Println(a.NotApplied(0), p.Flush())
	// Output:
	// acker: Stop: staged, never flushed, not applied: producer 0: 3 in shards [0]
	// 3 acker: acker stopped
}

// StopContext gives up on a receiver nobody polls at its deadline, and
// names it with the outcomes it lost.
func ExampleAcker_StopContext() {
	a := mustStart(acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 1}, OutcomeRingSize: 16,
		Shard: ackcore.Config{MaxPending: 1024}})
	p := a.Sender(0)
	for r := uint64(1); r <= 100; r++ {
		_ = p.Send(ackcore.Msg{Root: r, Kind: ackcore.Init, Val: r}) // pending until Stop
	}
	_ = p.Flush() // published: Stop applies them all before it reports them
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	st, err := a.StopContext(ctx) // nobody polls receiver 0
	fmt.Println(st.FailedStopped, errors.Is(err, context.DeadlineExceeded))
	fmt.Println(err)
	// Output:
	// 100 true
	// acker: Stop: context deadline exceeded: outcomes not taken: receiver 0 dropped 84 (16 left in its rings)
}

// EdgeID makes the ids of roots and edges: random, never 0. A replay is a
// new root, with a new id.
func ExampleEdgeID() {
	a := mustStart(acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 1}, Shard: ackcore.Config{MaxPending: 1024}})
	p, in := a.Sender(0), a.Inbox(0)
	emit := func() uint64 { // a spout emits one tuple; a bolt fails it
		root, edge := acker.EdgeID(), acker.EdgeID()
		_ = p.Send(ackcore.Msg{Root: root, Kind: ackcore.Init, Val: edge})
		_ = p.Send(ackcore.Msg{Root: root, Kind: ackcore.Fail})
		_ = p.Flush()
		return root
	}
	first := emit()
	outs, _ := in.Wait(nil)
	fmt.Println(outs[0].Kind, outs[0].Reason)
	replay := emit() // the replay: a fresh root id
	fmt.Println(replay != first && replay != 0)
	outs, _ = in.Wait(outs[:0])
	fmt.Println(outs[0].Root == replay)
	_, err := a.StopContext(context.Background())
	fmt.Println(err)
	// Output:
	// failed explicit
	// true
	// true
	// <nil>
}
