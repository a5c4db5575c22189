package ackcore

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/xorack/xorack/internal/layout"
	"github.com/xorack/xorack/internal/splitmix"
	"github.com/xorack/xorack/internal/testkit"
)

// TestLongRun drives one run of full groups far past distSat: roots
// chosen so that they all hash to the first group, so that the overflow
// counts of the groups they pass saturate too. Inserts (fast path and
// slow path), completions, fails and timeouts in random order must keep
// the tags, the overflow counts and the stored (saturated) distances
// exact, and every root must get its one outcome.
func TestLongRun(t *testing.T) {
	const bound = 640
	clock := &FakeClock{}
	s, err := NewShard(Config{MaxPending: bound, Timeout: 10 * time.Second, Clock: clock, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	var roots []uint64
	for r := uint64(1); len(roots) < 560; r++ {
		if root := r * 0x2545f4914f6cdd1d; s.t.home(root) == 0 {
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
	if d := s.t.e[distSat*groupSlots].storedDist(); d != distSat || s.t.overflow(1) != overflowSticky {
		t.Fatalf("distance %d at group %d, overflow count %d past the first: the run does not saturate", d, distSat, s.t.overflow(1))
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
	record(s.expireAll(nil))
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

// TestTableAligned checks that the slot array starts on a cache line for
// small tables (allocated from size classes) and large ones alike, and has
// exactly the slots asked for.
func TestTableAligned(t *testing.T) {
	var keep [][]entry // hold them, so each allocation lands somewhere new
	for _, n := range []int{1, 2, 3, 5, 7, 11, 13, 100, 1000, 1365, 1366, 20000} {
		for range 8 {
			e := alignedEntries(n)
			if len(e) != n || cap(e) != n {
				t.Fatalf("alignedEntries(%d): len %d cap %d", n, len(e), cap(e))
			}
			if a := uintptr(unsafe.Pointer(&e[0])) % layout.CacheLine; a != 0 {
				t.Fatalf("alignedEntries(%d) starts %d bytes into a line", n, a)
			}
			keep = append(keep, e)
		}
	}
	runtime.KeepAlive(keep)
	sh, err := NewShard(Config{MaxPending: 10})
	if err != nil {
		t.Fatal(err)
	}
	if a := uintptr(unsafe.Pointer(&sh.t.e[0])) % layout.CacheLine; a != 0 {
		t.Fatalf("a shard's table starts %d bytes into a line", a)
	}
	for _, n := range []int{1, 3, 100, 5000} {
		if a := uintptr(unsafe.Pointer(&alignedGroups(n)[0])) % layout.CacheLine; a != 0 {
			t.Fatalf("alignedGroups(%d) starts %d bytes into a line", n, a)
		}
	}
}

// TestTimeoutTiers runs a shard whose timeout spans many near-wheel windows
// (800 ticks, window 64) through many passes' worth of ticks, with roots
// created, completed, failed and reset at random while passes run (so
// backward shifts move entries across a pass's cursor). Expire runs every
// tick: every root still pending must time out in the Expire call at
// exactly its deadline tick, never earlier, never later, and nothing else.
func TestTimeoutTiers(t *testing.T) {
	// A big table, and a small, nearly full one in which deletes shift
	// entries across the pass's cursor often. A doomed root never hears
	// from its tree again: it must time out.
	for _, c := range []struct {
		bound, live, ops int
		doomed           float64
	}{{2000, 1500, 6, 0.3}, {200, 190, 12, 0.04}} {
		t.Run(fmt.Sprintf("bound=%d", c.bound), func(t *testing.T) { timeoutTiers(t, c.bound, c.live, c.ops, c.doomed) })
	}
}

func timeoutTiers(t *testing.T, bound, live, ops int, doomed float64) {
	const timeoutTicks = 800
	clock := &FakeClock{}
	s, err := NewShard(Config{MaxPending: bound, Timeout: timeoutTicks * time.Millisecond, Clock: clock, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if s.window != minWindow {
		t.Fatalf("window %d ticks, want %d", s.window, minWindow)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	deadline := map[uint64]uint64{} // pending root -> deadline tick
	var roots []uint64              // the pending roots not doomed, for random picks
	drop := func(k int) uint64 {
		r := roots[k]
		roots[k] = roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		delete(deadline, r)
		return r
	}
	next, timeouts := uint64(1), 0
	// 20 timeouts' worth of ticks (250 passes); under -short (CI's race
	// and invariants steps, which check the whole table at every Apply
	// and Expire) 5 (62 passes), past the first, filling, timeout.
	rounds := uint64(testkit.Size(20, 5))
	for tick := uint64(0); tick < rounds*timeoutTicks; tick++ {
		var msgs []Msg
		want := map[uint64]Reason{}
		for range rng.IntN(ops) {
			switch r := rng.IntN(20); {
			case r < 9 && len(deadline) < live:
				root := next * splitmix.Golden
				next++
				msgs = append(msgs, Msg{Root: root, Kind: Init, Task: 1, Val: 7})
				deadline[root] = tick + timeoutTicks
				if rng.Float64() >= doomed {
					roots = append(roots, root)
				}
			case r < 15 && len(roots) > 0:
				root := drop(rng.IntN(len(roots)))
				msgs = append(msgs, Msg{Root: root, Kind: Ack, Val: 7})
				want[root] = ReasonNone
			case r < 18 && len(roots) > 0:
				root := roots[rng.IntN(len(roots))]
				msgs = append(msgs, Msg{Root: root, Kind: Reset})
				deadline[root] = tick + timeoutTicks
			case len(roots) > 0:
				root := drop(rng.IntN(len(roots)))
				msgs = append(msgs, Msg{Root: root, Kind: Fail})
				want[root] = ReasonExplicit
			}
		}
		for _, o := range s.Apply(msgs, nil) {
			if r, ok := want[o.Root]; !ok || o.Reason != r || (r == ReasonNone) != (o.Kind == Completed) {
				t.Fatalf("tick %d: outcome %+v, want reason %v", tick, o, r)
			}
			delete(want, o.Root)
		}
		if len(want) != 0 {
			t.Fatalf("tick %d: no outcome for %v", tick, want)
		}
		clock.Add(time.Millisecond)
		for _, o := range s.expireAll(nil) {
			d, ok := deadline[o.Root]
			if !ok || o.Kind != Failed || o.Reason != ReasonTimeout || d != tick+1 {
				t.Fatalf("tick %d: Expire reported %+v; its deadline is tick %d (pending %v)", tick+1, o, d, ok)
			}
			delete(deadline, o.Root)
			for k, r := range roots {
				if r == o.Root {
					drop(k)
					break
				}
			}
			timeouts++
		}
		for r, d := range deadline {
			if d <= tick+1 {
				t.Fatalf("tick %d: root %#x due at tick %d did not time out", tick+1, r, d)
			}
		}
		if tick%64 == 0 {
			if err := s.verify(); err != nil {
				t.Fatalf("tick %d: %v", tick, err)
			}
		}
	}
	if timeouts < 100 {
		t.Fatalf("only %d timeouts: the run does not exercise the near wheel", timeouts)
	}
	t.Logf("%d timeouts, %d pending at the end", timeouts, len(deadline))
}

// TestSideTableMatchesMap drives the side table and a Go map with the same
// random puts and deletes over a small key space (so that probes collide
// and deletes shift), comparing every lookup, the count, and that the
// array shrinks back when the table empties.
func TestSideTableMatchesMap(t *testing.T) {
	k := newKeys(5)
	tab := sideTable{keys: &k}
	ref := map[uint64]sideRec{}
	rng := rand.New(rand.NewPCG(3, 4))
	for op := 0; op < 200_000; op++ {
		root := 1 + rng.Uint64N(3000)
		if op > 150_000 || rng.IntN(3) == 0 {
			tab.del(root)
			delete(ref, root)
		} else {
			r := sideRec{root: root, start: rng.Uint64(), timeout: rng.Int64()}
			tab.put(r)
			ref[root] = r
		}
		if got, ok := tab.get(root); ok != (ref[root] != sideRec{}) || got != ref[root] {
			t.Fatalf("op %d: get(%d) = %+v, %v; map has %+v", op, root, got, ok, ref[root])
		}
		if tab.len() != len(ref) {
			t.Fatalf("op %d: %d records, map %d", op, tab.len(), len(ref))
		}
	}
	for root := range ref {
		tab.del(root)
	}
	if tab.len() != 0 || tab.bytes() != 0 {
		t.Fatalf("emptied: %d records, %d bytes", tab.len(), tab.bytes())
	}
}
