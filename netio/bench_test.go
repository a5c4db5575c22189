package netio

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// BenchmarkLoopback: word-count-shaped trees (INIT + 8 ACKs) through one
// client over loopback to one server, a window of trees open, outcomes
// polled by the sending goroutine. msgs/s is every message sent.
func BenchmarkLoopback(b *testing.B) {
	for _, window := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("window=%d", window), func(b *testing.B) {
			s := startServer(b, func(c *ServerConfig) { c.Shard.MaxPending = 1 << 18; c.MaxConns = 4 })
			c, err := Dial(clientCfg(s.addr), acker.Spec{Producers: 1, Tasks: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Stop()
			rng := rand.New(rand.NewPCG(1, 1))
			const k = 8
			trees := make([][]ackcore.Msg, window)
			for i := range trees {
				trees[i] = tree(rng, uint64(i+1), 0, k)
			}
			p, ib := c.Producer(0), c.Receiver(0)
			var buf []ackcore.Outcome
			inflight := 0
			b.ResetTimer()
			t0 := time.Now()
			sent := 0
			gen := uint64(0)
			for sent < b.N {
				for i := 0; i < 64 && inflight < window; i++ {
					t := trees[(sent/(k+1))%window]
					gen++
					for j := range t {
						m := t[j]
						m.Root = gen
						_ = p.Send(m)
					}
					sent += len(t)
					inflight++
				}
				_ = p.Flush()
				if inflight >= window {
					buf, _ = ib.Wait(buf[:0]) // block, not spin: the pipeline needs both CPUs
				} else {
					buf = ib.Poll(buf[:0])
				}
				inflight -= len(buf)
			}
			for inflight > 0 {
				buf, _ = ib.Wait(buf[:0])
				inflight -= len(buf)
			}
			b.ReportMetric(float64(sent)/time.Since(t0).Seconds(), "msgs/s")
		})
	}
}
