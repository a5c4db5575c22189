package offsets_test

import (
	"errors"
	"fmt"

	"github.com/xorack/xorack/source/offsets"
)

// A partition's records are done out of order; the commit point moves only
// over records that are all done, and skips offsets that were never
// fetched (here 12 to 14, compacted away).
func Example() {
	t := offsets.New(1000) // at most 1000 uncommitted records
	t.Assign(10)           // fetching starts at the group's committed offset,
	t.Committed(10)        // which the tracker is told

	var marks []offsets.Mark
	for _, off := range []int64{10, 11, 15, 16} {
		m, err := t.Emit(off)
		if err != nil {
			panic(err)
		}
		marks = append(marks, m) // kept with the record while its tree runs
	}

	done := func(i int) {
		if err := t.Done(marks[i]); err != nil {
			panic(err)
		}
		off, ok := t.NextCommit()
		fmt.Printf("done %d: commit %d %v\n", marks[i].Offset, off, ok)
	}
	done(1) // 10 is not done: nothing to commit yet
	done(0)
	done(3)
	done(2)
	t.Committed(17) // the broker accepted the commit
	off, ok := t.NextCommit()
	fmt.Println("after the commit:", off, ok)
	// Output:
	// done 11: commit 10 false
	// done 10: commit 15 true
	// done 16: commit 15 true
	// done 15: commit 17 true
	// after the commit: 17 false
}

// At the limit the partition is full: the caller pauses fetching it until
// the lowest record is done.
func ExampleTracker_Full() {
	t := offsets.New(2)
	t.Assign(0)
	first, _ := t.Emit(0)
	t.Emit(1)
	_, err := t.Emit(2)
	fmt.Println(t.Full(), errors.Is(err, offsets.ErrFull))
	t.Done(first)
	fmt.Println(t.Full(), t.Uncommitted())
	st := t.Stats()
	fmt.Println("pauses:", st.Pauses, "refused:", st.Refused)
	// Output:
	// true true
	// false 1
	// pauses: 1 refused: 1
}

// After a rebalance (or a seek) the records in flight from the earlier
// assignment are dropped: their Done changes nothing.
func ExampleTracker_Assign() {
	t := offsets.New(100)
	t.Assign(0)
	old, _ := t.Emit(0)

	t.Assign(0) // the partition came back: record 0 will be fetched again
	again, _ := t.Emit(0)
	fmt.Println(t.Done(old))
	fmt.Println(t.Done(again), t.Committable())
	// Output:
	// offsets: mark from an earlier assignment generation
	// <nil> 1
}

// A commit carries the done records above the floor; after a crash the
// next owner reads them back and skips them instead of replaying them.
func ExampleTracker_AppendDone() {
	tr := offsets.New(100)
	tr.Assign(0)
	var marks []offsets.Mark
	for off := range int64(10) {
		m, _ := tr.Emit(off)
		marks = append(marks, m)
	}
	for _, i := range []int{0, 1, 4, 5, 6, 9} { // 2 is stuck in retries
		_ = tr.Done(marks[i])
	}
	meta, complete := tr.AppendDone(nil, 4096) // Kafka's default offset.metadata.max.bytes
	floor := tr.Committable()

	d, err := offsets.ParseDone(string(meta))
	if err != nil || d.Floor != floor {
		panic("not the floor committed")
	}
	for off := floor; off < 10; off++ {
		if !d.Contains(off) {
			fmt.Print(off, " ")
		}
	}
	fmt.Println("replayed; complete:", complete)
	// Output: 2 3 7 8 replayed; complete: true
}
