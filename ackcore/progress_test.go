package ackcore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/acktest"
)

// TestProgressTimeout: with a 1 s timeout, trees acked every 500 ms for 5 s
// (a bolt 10x slower than the timeout allows for the whole tree) never
// time out and complete with their true latency; a tree whose last tuple
// is stuck times out one timeout after its last ACK, not after its INIT;
// progress keeps a root for at most ProgressCap; without the option the
// slow trees time out at 1 s.
func TestProgressTimeout(t *testing.T) {
	for _, progress := range []bool{true, false} {
		clock := &ackcore.FakeClock{}
		s, err := ackcore.NewShard(ackcore.Config{MaxPending: 1000, Timeout: time.Second, Clock: clock,
			ProgressTimeout: progress, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		const slow, stuck, capped = 100, 200, 300 // root ids: 100 slow trees, then the stuck one, then one acked forever
		var msgs []ackcore.Msg
		for r := uint64(1); r <= slow; r++ {
			msgs = append(msgs, acktest.InitMsg(r, 1, 1<<10-1)) // ten edges: bits 0..9
		}
		msgs = append(msgs, acktest.InitMsg(stuck, 1, 3), acktest.InitMsg(capped, 1, 1<<62))
		var out []ackcore.Outcome
		outcomes := map[uint64]ackcore.Outcome{}
		apply := func(m []ackcore.Msg) {
			for _, o := range s.Apply(m, out[:0]) {
				outcomes[o.Root] = o
			}
		}
		expire := func() {
			for more := true; more; {
				var exp []ackcore.Outcome
				exp, more = s.Expire(make([]ackcore.Outcome, 0, 64))
				for _, o := range exp {
					outcomes[o.Root] = o
				}
			}
		}
		apply(msgs)
		// Every 500 ms one edge of each slow tree is acked; the stuck
		// tree acks one of its two edges at 0.5 s; the capped one acks
		// a value that never zeroes it.
		for step := 1; step <= 40; step++ {
			for range 50 {
				clock.Add(10 * time.Millisecond)
				expire()
			}
			msgs = msgs[:0]
			if step <= 10 {
				for r := uint64(1); r <= slow; r++ {
					msgs = append(msgs, acktest.AckMsg(r, 1<<(step-1)))
				}
			}
			if step == 1 {
				msgs = append(msgs, acktest.AckMsg(stuck, 1))
			}
			msgs = append(msgs, acktest.AckMsg(capped, 1))
			apply(msgs)
		}
		mustVerify(t, s)
		if !progress {
			if o := outcomes[1]; o.Reason != ackcore.ReasonTimeout || o.Latency < time.Second || o.Latency > time.Second+2*time.Millisecond {
				t.Fatalf("no progress timeouts: slow tree %+v, want a timeout at 1 s", o)
			}
			continue
		}
		for r := uint64(1); r <= slow; r++ {
			if o := outcomes[r]; o.Kind != ackcore.Completed || o.Latency < 5*time.Second-time.Millisecond || o.Latency > 5*time.Second+time.Millisecond {
				t.Fatalf("slow tree %d: %+v, want Completed after 5 s", r, o)
			}
		}
		// Stuck: last progress at 0.5 s, so timed out at 1.5 s.
		if o := outcomes[stuck]; o.Reason != ackcore.ReasonTimeout || o.Latency < 1500*time.Millisecond || o.Latency > 1502*time.Millisecond {
			t.Fatalf("stuck tree %+v, want a timeout 1.5 s after its INIT", o)
		}
		// Capped: acked every 500 ms for 20 s, but ProgressCap (10 s).
		if o := outcomes[capped]; o.Reason != ackcore.ReasonTimeout || o.Latency < 10*time.Second || o.Latency > 10*time.Second+2*time.Millisecond {
			t.Fatalf("capped tree %+v, want a timeout at the 10 s cap", o)
		}
		if s.ProgressCap() != 10*time.Second {
			t.Fatalf("ProgressCap %v", s.ProgressCap())
		}
	}
}

// TestProgressConfig: the cap needs the option and whole ticks.
func TestProgressConfig(t *testing.T) {
	for _, c := range []ackcore.Config{
		{MaxPending: 10, ProgressCap: time.Second},
		{MaxPending: 10, ProgressTimeout: true, ProgressCap: -1},
		{MaxPending: 10, ProgressTimeout: true, ProgressCap: 25 * time.Hour},
		{MaxPending: 10, ProgressTimeout: true, ProgressCap: 1500 * time.Microsecond},
	} {
		if _, err := ackcore.NewShard(c); err == nil {
			t.Errorf("%+v accepted", c)
		} else if !strings.Contains(err.Error(), "ProgressCap") {
			t.Errorf("%+v: %v, want it to name ProgressCap", c, err)
		}
	}
}

// TestBudgetErrorWording: a configuration over its memory budget names
// every byte count as people read it too.
func TestBudgetErrorWording(t *testing.T) {
	_, err := ackcore.NewShard(ackcore.Config{MaxPending: 1 << 20, MaxBytes: 1 << 20})
	want := "ackcore: Config.MaxPending 1048576 needs up to 176615830 bytes (168.4 MiB), 35046232 bytes (33.4 MiB) of it for the table (allocated up front), over the memory budget MaxBytes 1048576 bytes (1.0 MiB)"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant  %s", err, want)
	}
}
