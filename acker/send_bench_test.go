package acker_test

import (
	"fmt"
	"testing"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// BenchmarkSend is the producer's path end to end, one goroutine sending
// INIT and ACK pairs (each root completes) through one shard, its
// receiver run beside it: Send one message at a time, and SendBatch a
// batch of 256, with a Flush per 1,024 messages. ns/op is per message.
func BenchmarkSend(b *testing.B) {
	for _, mode := range []string{"Send", "SendBatch"} {
		b.Run(fmt.Sprintf("call=%s", mode), func(b *testing.B) {
			a, err := acker.New(acker.Config{Spec: acker.Spec{Producers: 1, Tasks: 1}, Shard: ackcore.Config{MaxPending: 1 << 16}})
			if err != nil {
				b.Fatal(err)
			}
			if err := a.Start(); err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				a.Inbox(0).(*acker.Receiver).Run(func(ackcore.Outcome) {})
				close(done)
			}()
			p := a.Sender(0).(*acker.Producer) // the concrete handle: direct calls, as before
			batch := make([]ackcore.Msg, 0, 256)
			root := uint64(0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += 2 {
				root++
				init := ackcore.Msg{Root: root, Kind: ackcore.Init, Val: root}
				ack := ackcore.Msg{Root: root, Kind: ackcore.Ack, Val: root}
				if mode == "Send" {
					if p.Send(init) != nil || p.Send(ack) != nil {
						b.Fatal("send failed")
					}
				} else if batch = append(batch, init, ack); len(batch) == cap(batch) {
					if err := p.SendBatch(batch); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
				if i%1024 == 0 {
					if err := p.Flush(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			_ = p.SendBatch(batch)
			_ = p.Flush()
			a.Stop()
			<-done
		})
	}
}
