package netio

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// BenchmarkLoopback: word-count-shaped trees (INIT + 8 ACKs) through one
// client over one loopback connection to one server (1 shard), a window
// of trees open, the sending goroutine polling its own outcomes as a
// spout executor does. The producer hands over batch messages at a time
// (SendBatch, then Flush): one frame per batch, coalesced by the client's
// writer with whatever else is queued. msgs/s counts every message sent;
// cpu-ns/msg is the process's CPU time (getrusage: client, server, acker
// and the producer) over the messages.
func BenchmarkLoopback(b *testing.B) {
	for _, batch := range []int{16, 256} {
		for _, window := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("batch=%d/window=%d", batch, window), func(b *testing.B) {
				benchLoopback(b, batch, window)
			})
		}
	}
}

func benchLoopback(b *testing.B, batch, window int) {
	s := startServer(b, func(c *ServerConfig) { c.Shard.MaxPending = 1 << 18; c.MaxConns = 4 })
	c := mustDial(b, clientCfg(s.addr), acker.Spec{Producers: 1, Tasks: 1})
	defer c.Stop()
	// A stream of trees, an INIT and 8 ACKs each: every batch carries
	// INITs and ACKs of several roots.
	st := newTreeStream(rand.New(rand.NewPCG(1, 1)), 8)
	p, ib := c.send[0], c.inbox[0]
	out := make([]ackcore.Outcome, 0, 4096)
	send := make([]ackcore.Msg, 0, batch)
	inflight, sent := 0, 0
	// nextBatch fills send with the next batch of the stream.
	nextBatch := func() {
		send = send[:0]
		for len(send) < batch && (len(send) == 0 || sent+len(send) < b.N || !st.atTree()) {
			m := st.next()
			if m.Kind == ackcore.Init {
				inflight++
			}
			send = append(send, m)
		}
	}
	b.ResetTimer()
	cpu0, t0 := cpuTime(), time.Now()
	for sent < b.N || !st.atTree() { // end on a whole tree
		nextBatch()
		if err := p.SendBatch(send); err != nil {
			b.Fatal(err)
		}
		if err := p.Flush(); err != nil {
			b.Fatal(err)
		}
		sent += len(send)
		if inflight >= window {
			out, _ = ib.Wait(out[:0]) // block, not spin: the pipeline needs both CPUs
		} else {
			out = ib.Poll(out[:0])
		}
		inflight -= len(out)
	}
	for inflight > 0 {
		var ok bool
		if out, ok = ib.Wait(out[:0]); !ok {
			b.Fatalf("inbox closed with %d roots in flight", inflight)
		}
		inflight -= len(out)
		for _, o := range out {
			if o.Kind != ackcore.Completed {
				b.Fatalf("root %#x: %v, want completed", o.Root, o)
			}
		}
	}
	d, cpu := time.Since(t0), cpuTime()-cpu0
	b.ReportMetric(float64(sent)/d.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(sent), "cpu-ns/msg")
}

// cpuTime is the process's CPU time, user and system, every thread.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFairShare: what the flood of TestFairShare costs a steady
// client. Two servers in this process, each with the same 20 client
// connections owning a task: on one they flood and hold their room, on
// the other they stay idle; a steady client on each runs trees (an INIT
// and 3 ACKs, 200 in flight) in rounds of 20,000 that alternate between
// the two, so that the machine's other load weighs both arms alike. A
// round's cost is the process's CPU time over it (the steady client, the
// flooders, both servers and their ackers): the flood's cost is CPU the
// process spends. quiet-trees/cpu-s and flooded-trees/cpu-s are the arms'
// rates over every round; flooded/quiet is their ratio, which netio's
// rule 10 says stays at 0.9 or above (CI gates on it).
func BenchmarkFairShare(b *testing.B) {
	const round = 20000
	var steady [2]*Client // quiet, flooded
	for arm := range steady {
		s, table := startFairServer(b)
		// The steady client connects first: a newcomer gets room only
		// as the others' roots finish.
		cfg := clientCfg(s.addr)
		cfg.ID = 1
		steady[arm] = mustDial(b, cfg, acker.Spec{Producers: 1, Tasks: 1})
		defer steady[arm].Stop()
		f := connectFlood(b, s, table)
		defer f.stop()
		if arm == 1 {
			f.start(b)
			f.waitAtRoom(b, s)
		}
		// A first round warms each arm up, uncounted.
		if done, failed := treesOn(b, steady[arm], 0, 0, round, 200); done != round {
			b.Fatalf("arm %d: the steady client completed %d of %d trees, failed %v", arm, done, round, failed)
		}
	}
	var cpu [2]time.Duration
	var trees [2]int
	b.ResetTimer()
	for i := 0; trees[0]+trees[1] < b.N; i++ {
		n := min(round, max(1, (b.N-trees[0]-trees[1])/2))
		for k := range 2 {
			arm := (i + k) % 2 // each arm first every other round
			c0 := cpuTime()
			done, failed := treesOn(b, steady[arm], uint64(1+i)*round, 0, n, 200)
			cpu[arm] += cpuTime() - c0
			if done != n {
				b.Fatalf("arm %d: the steady client completed %d of %d trees, failed %v", arm, done, n, failed)
			}
			trees[arm] += n
		}
	}
	q, f := float64(trees[0])/cpu[0].Seconds(), float64(trees[1])/cpu[1].Seconds()
	b.ReportMetric(q, "quiet-trees/cpu-s")
	b.ReportMetric(f, "flooded-trees/cpu-s")
	b.ReportMetric(f/q, "flooded/quiet")
}
