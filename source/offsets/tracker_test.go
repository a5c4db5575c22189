package offsets

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// emitAll emits offs in order on t, failing the test on an error.
func emitAll(tb testing.TB, t *Tracker, offs ...int64) []Mark {
	tb.Helper()
	marks := make([]Mark, len(offs))
	for i, off := range offs {
		m, err := t.Emit(off)
		if err != nil {
			tb.Fatalf("Emit(%d): %v", off, err)
		}
		marks[i] = m
	}
	return marks
}

func doneAll(tb testing.TB, t *Tracker, marks ...Mark) {
	tb.Helper()
	for _, m := range marks {
		if err := t.Done(m); err != nil {
			tb.Fatalf("Done(offset %d): %v", m.Offset, err)
		}
	}
}

func wantCommittable(tb testing.TB, t *Tracker, want int64) {
	tb.Helper()
	if got := t.Committable(); got != want {
		tb.Fatalf("Committable = %d, want %d", got, want)
	}
	t.check()
}

// STORM-2505: offsets missing between fetched records (compaction,
// deletion, transaction markers) are never waited for, and a gap of any
// size costs no ring bits.
func TestGapsAreNotWaitedFor(t *testing.T) {
	tr := New(8)
	tr.Assign(10)
	m := emitAll(t, tr, 10, 11, 15, 20, 1<<50)
	wantCommittable(t, tr, 10)
	doneAll(t, tr, m[1], m[0])
	wantCommittable(t, tr, 15) // 12..14 were never fetched
	doneAll(t, tr, m[3])
	wantCommittable(t, tr, 15)
	doneAll(t, tr, m[2])
	wantCommittable(t, tr, 1<<50) // 21..2^50-1 were never fetched
	if tr.Uncommitted() != 1 {
		t.Fatalf("Uncommitted = %d, want 1: gaps are not records", tr.Uncommitted())
	}
	doneAll(t, tr, m[4])
	wantCommittable(t, tr, 1<<50+1)
}

// The assignment may start below the first record that still exists
// (retention deleted the head of the partition): the first record fetched
// is the first one waited for.
func TestStartBelowFirstRecord(t *testing.T) {
	tr := New(8)
	tr.Assign(100)
	wantCommittable(t, tr, 100)
	m := emitAll(t, tr, 5000)
	wantCommittable(t, tr, 5000)
	doneAll(t, tr, m...)
	wantCommittable(t, tr, 5001)
}

// STORM-2343, STORM-2549: one record not done stops the commit at that
// record only; the records after it go on, up to the limit, and the
// partition catches up the moment it is done.
func TestOneStuckRecordStopsOnlyAtIt(t *testing.T) {
	const limit = 100
	tr := New(limit)
	tr.Assign(0)
	var marks []Mark
	for off := range int64(limit) {
		marks = append(marks, emitAll(t, tr, off)...)
	}
	for i, m := range marks {
		if i != 5 {
			doneAll(t, tr, m)
		}
	}
	wantCommittable(t, tr, 5)
	if got, ok := tr.NextCommit(); !ok || got != 5 {
		t.Fatalf("NextCommit = %d, %v; want 5, true", got, ok)
	}
	if tr.Uncommitted() != limit-5 || tr.Pending() != 1 || tr.Full() {
		t.Fatalf("Uncommitted %d Pending %d Full %v; want %d, 1, false", tr.Uncommitted(), tr.Pending(), tr.Full(), limit-5)
	}
	// Five more fit before the limit; the sixth is refused.
	more := emitAll(t, tr, 100, 101, 102, 103, 104)
	if !tr.Full() {
		t.Fatal("not Full at the limit")
	}
	if _, err := tr.Emit(105); err != ErrFull {
		t.Fatalf("Emit past the limit: %v, want ErrFull", err)
	}
	doneAll(t, tr, marks[5])
	wantCommittable(t, tr, 100)
	doneAll(t, tr, more...)
	wantCommittable(t, tr, 105)
	if tr.Full() || tr.Uncommitted() != 0 {
		t.Fatalf("Full %v, Uncommitted %d after all done", tr.Full(), tr.Uncommitted())
	}
}

// The cap pauses the partition: Full, ErrFull, counted in Pauses (times it
// became full) and Refused (emits turned away), and nothing is recorded
// for a refused emit.
func TestFullIsCountedAndVisible(t *testing.T) {
	tr := New(4)
	tr.Assign(0)
	m := emitAll(t, tr, 0, 1, 2, 3)
	for range 3 {
		if _, err := tr.Emit(4); err != ErrFull {
			t.Fatalf("Emit at the limit: %v, want ErrFull", err)
		}
	}
	st := tr.Stats()
	if !tr.Full() || st.Pauses != 1 || st.Refused != 3 || st.Uncommitted != 4 || st.Emitted != 4 {
		t.Fatalf("Full %v, stats %+v; want Full, 1 pause, 3 refused, 4 uncommitted, 4 emitted", tr.Full(), st)
	}
	// A done record above the lowest one does not free a slot.
	doneAll(t, tr, m[3])
	if !tr.Full() {
		t.Fatal("a done record above a pending one freed a slot")
	}
	doneAll(t, tr, m[0])
	if tr.Full() {
		t.Fatal("still Full after the lowest record was done")
	}
	emitAll(t, tr, 4)
	if st := tr.Stats(); st.Pauses != 2 {
		t.Fatalf("Pauses = %d after filling again, want 2", st.Pauses)
	}
}

// STORM-2104: a Done for an earlier assignment (before a revocation, a
// rebalance or a seek) is dropped, whatever its offset; so is one from
// another tracker and the zero Mark.
func TestEarlierGenerationIsDropped(t *testing.T) {
	tr := New(16)
	g1 := tr.Assign(0)
	old := emitAll(t, tr, 0, 1, 2)
	g2 := tr.Assign(0) // seek back to the start: records 0..2 replay
	if g2 <= g1 {
		t.Fatalf("generations %d then %d: not increasing", g1, g2)
	}
	cur := emitAll(t, tr, 0, 1)
	for _, m := range old {
		if err := tr.Done(m); err != ErrStale {
			t.Fatalf("Done of generation %d's offset %d: %v, want ErrStale", g1, m.Offset, err)
		}
	}
	wantCommittable(t, tr, 0) // the stale dones moved nothing
	other := New(16)
	other.Assign(0)
	foreign := emitAll(t, other, 0)
	if err := tr.Done(foreign[0]); err != ErrStale {
		t.Fatalf("Done of another tracker's mark: %v, want ErrStale", err)
	}
	if err := tr.Done(Mark{}); err != ErrStale {
		t.Fatalf("Done of the zero Mark: %v, want ErrStale", err)
	}
	doneAll(t, tr, cur...)
	wantCommittable(t, tr, 2)
	st := tr.Stats()
	if st.Stale != 5 || st.Dropped != 3 || st.Done != 2 {
		t.Fatalf("stats %+v: want 5 stale, 3 dropped, 2 done", st)
	}
	tr.Revoke()
	if _, err := tr.Emit(2); !errors.Is(err, errNotAssigned) {
		t.Fatalf("Emit after Revoke: %v, want errNotAssigned", err)
	}
	if err := tr.Done(cur[0]); err != ErrStale {
		t.Fatalf("Done after Revoke: %v, want ErrStale", err)
	}
	if _, ok := tr.NextCommit(); ok {
		t.Fatal("NextCommit offers a commit for a revoked partition")
	}
}

// franz-go#689: the committed offset only rises; a late reply to an earlier
// commit cannot move it back, and a seek backwards replays without
// offering a lower commit.
func TestCommitsAreMonotonic(t *testing.T) {
	tr := New(16)
	tr.Assign(0)
	doneAll(t, tr, emitAll(t, tr, 0, 1, 2)...)
	first, ok := tr.NextCommit()
	if !ok || first != 3 {
		t.Fatalf("NextCommit = %d, %v; want 3, true", first, ok)
	}
	doneAll(t, tr, emitAll(t, tr, 3, 4)...)
	second, _ := tr.NextCommit()
	if !tr.Committed(second) || tr.Committed(first) { // the reply to the first commit arrives last
		t.Fatal("Committed did not take the later commit, or took the late one")
	}
	if _, ok := tr.NextCommit(); ok {
		t.Fatal("NextCommit offers a commit at the committed offset")
	}
	tr.Assign(1) // seek back
	doneAll(t, tr, emitAll(t, tr, 1, 2)...)
	if off, ok := tr.NextCommit(); ok || off != second {
		t.Fatalf("after seeking back: NextCommit = %d, %v; want %d, false", off, ok, second)
	}
	doneAll(t, tr, emitAll(t, tr, 3, 4, 5)...)
	if off, ok := tr.NextCommit(); !ok || off != 6 {
		t.Fatalf("after replaying past it: NextCommit = %d, %v; want 6, true", off, ok)
	}
	if st := tr.Stats(); st.LateCommits != 1 || st.Committed != second {
		t.Fatalf("stats %+v: want 1 late commit, committed %d", st, second)
	}
}

func TestErrorsNameTheValues(t *testing.T) {
	tr := New(4)
	if _, err := tr.Emit(7); !errors.Is(err, errNotAssigned) || !strings.Contains(err.Error(), "offset 7") {
		t.Fatalf("unassigned Emit: %v", err)
	}
	tr.Assign(10)
	if _, err := tr.Emit(9); !errors.Is(err, errOrder) || !strings.Contains(err.Error(), "offset 9 below the assignment's start 10") {
		t.Fatalf("Emit below start: %v", err)
	}
	m := emitAll(t, tr, 12)
	if _, err := tr.Emit(12); !errors.Is(err, errOrder) || !strings.Contains(err.Error(), "offset 12 not above the last emitted offset 12") {
		t.Fatalf("Emit repeated: %v", err)
	}
	doneAll(t, tr, m...)
	if err := tr.Done(m[0]); !errors.Is(err, errDuplicate) || !strings.Contains(err.Error(), "offset 12") {
		t.Fatalf("second Done: %v", err)
	}
	tr.check()
}

func TestNewRejectsBadLimits(t *testing.T) {
	for _, limit := range []int{0, -1, MaxLimit + 1} {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if want := fmt.Sprintf("offsets: limit %d not in", limit); !strings.Contains(msg, want) {
					t.Errorf("New(%d) panicked with %q, want %q", limit, msg, want)
				}
			}()
			New(limit)
		}()
	}
}

// The ring is one bit per record up to the limit rounded up to a power of
// two, at least one word.
func TestRingBytes(t *testing.T) {
	for _, c := range []struct{ limit, bytes int }{{1, 8}, {64, 8}, {65, 16}, {10_000, 2048}, {1 << 20, 1 << 17}} {
		if got := New(c.limit).RingBytes(); got != c.bytes {
			t.Errorf("New(%d).RingBytes() = %d, want %d", c.limit, got, c.bytes)
		}
	}
}

// Emit and Done allocate nothing once the run ring has grown to the
// partition's gaps.
func TestMarksDoNotAllocate(t *testing.T) {
	tr := New(1024)
	tr.Assign(0)
	var window [64]Mark
	off := int64(0)
	for i := range window {
		window[i] = emitAll(t, tr, off)[0]
		off += 2 // a gap after every record: a run each
	}
	i := 0
	allocs := testing.AllocsPerRun(10_000, func() {
		j := (i * 37) % len(window) // a fixed scramble of the window
		i++
		if err := tr.Done(window[j]); err != nil {
			t.Fatal(err)
		}
		m, err := tr.Emit(off)
		if err != nil {
			t.Fatal(err)
		}
		window[j] = m
		off += 2
		if c, ok := tr.NextCommit(); ok {
			tr.Committed(c)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.2f allocations per Done+Emit, want 0", allocs)
	}
	tr.check()
}

// A long run through a small ring: the window wraps the ring many times,
// records done in a scrambled order, and the commit point keeps up.
func TestRingWraps(t *testing.T) {
	const limit = 100 // a 128-bit ring
	tr := New(limit)
	tr.Assign(0)
	var window [limit]Mark
	for i := range window {
		window[i] = emitAll(t, tr, int64(i))[0]
	}
	next := int64(limit)
	for round := range 200 {
		// Done the whole window in a scramble, then refill it.
		for k := range limit {
			doneAll(t, tr, window[(k*61+round)%limit])
		}
		wantCommittable(t, tr, next)
		for i := range window {
			window[i] = emitAll(t, tr, next)[0]
			next++
		}
		if !tr.Full() {
			t.Fatalf("round %d: not Full with %d records outstanding", round, limit)
		}
	}
}
