package pipeline_test

import (
	"fmt"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/bench/internal/pipeline"
)

// Each pipeline is driven as an engine drives an acker: a sender per
// producer, an inbox per receiver.
func Example() {
	for _, impl := range pipeline.Impls {
		p, err := pipeline.New(impl, pipeline.Config{Producers: 1, Tasks: 1, Shards: 1, MaxPending: 1024})
		if err != nil {
			panic(err)
		}
		if err := p.Start(); err != nil {
			panic(err)
		}
		s := p.Sender(0)
		s.SendBatch([]ackcore.Msg{
			{Root: 7, Kind: ackcore.Init, Task: 0, Val: 0x33},
			{Root: 7, Kind: ackcore.Ack, Val: 0x33},
		})
		s.Flush()
		outs, _ := p.Inbox(0).Wait(nil)
		st := p.Stop()
		fmt.Printf("%s: root %d %v, %d completed\n", impl, outs[0].Root, outs[0].Kind, st.Completed)
	}
	// Output:
	// xorack: root 7 completed, 1 completed
	// mutexmap: root 7 completed, 1 completed
	// chanshard: root 7 completed, 1 completed
}
