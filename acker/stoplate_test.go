package acker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// stageTail is what stage does once its look at the seal said open: put m
// in shard s's span. Calling it after StopContext is a send that passed
// that look before the seal and was descheduled until Stop had counted.
func stageTail(p *Producer, s int, m ackcore.Msg) {
	p.spans[s][p.fill[s]] = m
	p.fill[s]++
}

// TestStopLateStage plays, one step at a time, the interleaving a send
// racing Stop can take: the producer has k messages staged in an open
// span (k = 0: it has just reserved the span), Stop seals and counts k,
// and then the send stages one more and returns nil, its producer never
// calling again. NotApplied must say k+1 all the same (StopError says
// the k Stop saw), and a later call by the producer reports the one
// message Stop did not count without NotApplied counting it twice.
func TestStopLateStage(t *testing.T) {
	for _, k := range []int{0, 1, 5} {
		a, err := New(Config{Shards: 1, Spec: Spec{Producers: 1, Tasks: 1}, Batch: 8, RingSize: 64,
			Shard: ackcore.Config{MaxPending: 1024}})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		p := a.producers[0]
		if k == 0 && !p.reserve(0, true) {
			t.Fatal("reserve on an open ring failed")
		}
		for r := range k {
			if err := p.Send(ackcore.Msg{Root: uint64(r) + 1, Kind: ackcore.Init, Val: 1}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a Stop that hangs fails, naming the deadline
		_, stopErr := a.StopContext(ctx)
		cancel()
		var se *StopError
		switch {
		case k == 0 && stopErr != nil:
			t.Fatalf("k %d: StopContext: %v, want nil (nothing staged when it counted)", k, stopErr)
		case k > 0 && (!errors.As(stopErr, &se) || len(se.Unflushed) != 1 || se.Unflushed[0].Staged != k):
			t.Fatalf("k %d: StopContext: %v, want producer 0 counted with %d", k, stopErr, k)
		}
		stageTail(p, 0, ackcore.Msg{Root: 100, Kind: ackcore.Init, Val: 1})
		if n := a.NotApplied(0); n != uint64(k)+1 {
			t.Fatalf("k %d: NotApplied %d after a message staged past Stop's count, want %d", k, n, k+1)
		}
		var na *NotAppliedError
		if err := p.Flush(); !errors.As(err, &na) || na.N != 1 {
			t.Fatalf("k %d: the producer's next call: %v, want a NotAppliedError of 1", k, err)
		}
		if n := a.NotApplied(0); n != uint64(k)+1 {
			t.Fatalf("k %d: NotApplied %d after the producer reported, want %d", k, n, k+1)
		}
	}
}
