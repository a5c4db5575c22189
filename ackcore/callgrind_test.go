package ackcore_test

import (
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/acktest/workload"
	"github.com/xorack/xorack/internal/callgrind"
)

// TestCallgrindWorkload is the fixed workload .ci/callgrind counts
// instructions over: a word-count stream with 10,000 roots pending, warmed
// up, then XORACK_CALLGRIND_MSGS messages applied with callgrind collecting
// only around them; XORACK_NOASM=1 measures the portable Go loop instead of
// the assembly one; XORACK_CALLGRIND_P sets the roots pending (10,000 when
// unset) and XORACK_CALLGRIND_SHAPE the tree shape (workload.ByName; the
// word count when unset). It runs (briefly) as an ordinary test too, checking
// that the stream completes cleanly.
func TestCallgrindWorkload(t *testing.T) {
	n := 20_000
	if v := os.Getenv("XORACK_CALLGRIND_MSGS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("XORACK_CALLGRIND_MSGS=%q: want a positive count", v)
		}
	}
	if os.Getenv("XORACK_NOASM") == "1" {
		defer ackcore.SetAckRun(false)()
	}
	loop := "go"
	if ackcore.AckRunAvailable() {
		loop = "asm"
	}
	p := 10_000
	if v := os.Getenv("XORACK_CALLGRIND_P"); v != "" { // other sizes, by hand
		var err error
		if p, err = strconv.Atoi(v); err != nil || p <= 0 {
			t.Fatalf("XORACK_CALLGRIND_P=%q: want a positive count", v)
		}
	}
	shape := workload.WordCount
	if v := os.Getenv("XORACK_CALLGRIND_SHAPE"); v != "" { // other shapes, by hand
		var err error
		if shape, err = workload.ByName(v); err != nil {
			t.Fatal(err)
		}
	}
	st := workload.Build(shape, p, 1)
	clock := &ackcore.FakeClock{}
	s := mustShard(t, ackcore.Config{MaxPending: st.MaxPending(), Clock: clock, Seed: 1})
	out := make([]ackcore.Outcome, 0, benchBatch)
	apply := func(msgs []ackcore.Msg) {
		for i := 0; i < len(msgs); i += benchBatch {
			out = s.Apply(msgs[i:min(i+benchBatch, len(msgs))], out[:0])
		}
	}
	apply(st.Prefix)
	apply(st.Cycle[:len(st.Cycle)/2])
	msgs := make([]ackcore.Msg, 0, n)
	for pos := len(st.Cycle) / 2; len(msgs) < n; pos = (pos + 1) % len(st.Cycle) {
		msgs = append(msgs, st.Cycle[pos])
	}
	before := s.Stats()
	// Collect garbage now, so that no GC cycle started by the warm-up runs
	// (on this one thread, GOMAXPROCS=1) inside the measured loop: it
	// added up to 7 instructions per message to some runs.
	runtime.GC()
	callgrind.Toggle()
	apply(msgs)
	callgrind.Toggle()
	after := s.Stats()
	applied := (after.Inits + after.Acks) - (before.Inits + before.Acks)
	if applied != uint64(n) || after.Failed() != 0 || after.RefusedFull != 0 {
		t.Fatalf("applied %d of %d messages; stats %+v", applied, n, after)
	}
	t.Logf("callgrind-msgs %d", n)
	t.Logf("callgrind-loop %s", loop)
}
