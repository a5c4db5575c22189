package ackcore

import (
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"
)

// TestLongRun drives one run of occupied slots far past distSat: roots
// chosen so that they all hash to the first few slots. Inserts (fast path
// and slow path), completions, fails and timeouts in random order must
// keep Robin Hood order and the stored (saturated) distances exact, and
// every root must get its one outcome.
func TestLongRun(t *testing.T) {
	const bound = 400
	clock := &FakeClock{}
	s, err := NewShard(Config{MaxPending: bound, Timeout: 10 * time.Second, Clock: clock, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	var roots []uint64
	for r := uint64(1); len(roots) < 320; r++ {
		if root := r * 0x2545f4914f6cdd1d; s.t.home(root) < 3 {
			roots = append(roots, root)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	outcomes := map[uint64]Outcome{}
	record := func(out []Outcome) {
		for _, o := range out {
			if prev, dup := outcomes[o.Root]; dup {
				t.Fatalf("second outcome %+v for root %#x after %+v", o, o.Root, prev)
			}
			outcomes[o.Root] = o
		}
	}
	verify := func(when string) {
		t.Helper()
		if err := s.verify(); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}
	// Insert: most INITs in batches (the fast path), some with a per-root
	// timeout or after an early ACK (the slow path).
	for i := 0; i < len(roots); {
		var batch []Msg
		for j := 0; j < 1+rng.IntN(16) && i < len(roots); j, i = j+1, i+1 {
			r := roots[i]
			switch i % 5 {
			case 1:
				batch = append(batch, Msg{Root: r, Kind: Init, Task: 3, Val: 1, TimeoutMs: 20_000})
			case 2:
				batch = append(batch, Msg{Root: r, Kind: Ack, Val: 2}, Msg{Root: r, Kind: Init, Task: 4, Val: 3})
			default:
				batch = append(batch, Msg{Root: r, Kind: Init, Task: 5, Val: 1})
			}
		}
		record(s.Apply(batch, nil))
		verify("insert")
	}
	if max := s.t.distAt(uint64(s.t.count) - 1); max < distSat {
		t.Fatalf("longest distance %d: the run does not reach distSat", max)
	}
	// Remove in random order: completions, fails, and the rest by timeout.
	perm := rng.Perm(len(roots))
	for n, k := range perm[:len(perm)*2/3] {
		r := roots[k]
		m := Msg{Root: r, Kind: Ack, Val: 1} // every root's val is 1 by now (2^3 for the early ACKs)
		if n%4 == 0 {
			m = Msg{Root: r, Kind: Fail}
		}
		record(s.Apply([]Msg{m}, nil))
		verify("remove")
	}
	clock.Add(30 * time.Second)
	record(s.ExpireAll(nil))
	verify("expire")
	if s.t.count != 0 || len(outcomes) != len(roots) {
		t.Fatalf("%d pending, %d outcomes for %d roots", s.t.count, len(outcomes), len(roots))
	}
	for n, k := range perm {
		o := outcomes[roots[k]]
		switch {
		case n >= len(perm)*2/3:
			if o.Kind != Failed || o.Reason != ReasonTimeout {
				t.Fatalf("root %#x left pending: %+v, want a timeout", roots[k], o)
			}
		case n%4 == 0:
			if o.Kind != Failed || o.Reason != ReasonExplicit {
				t.Fatalf("failed root %#x: %+v", roots[k], o)
			}
		case o.Kind != Completed:
			t.Fatalf("acked root %#x: %+v", roots[k], o)
		}
	}
}

// TestEntrySize keeps entryBytes true.
func TestEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(entry{}); got != entryBytes {
		t.Fatalf("entry is %d bytes, entryBytes says %d", got, entryBytes)
	}
}
