package kafka

import (
	"sync"
	"testing"
	"time"
)

// Every assigned partition is served: with 8 partitions full of small
// records (each fetch holds thousands of one partition's records) and a
// worker slower than fetching, every partition's first record is
// processed within a second of the assignment, and while the worker is
// behind each partition's processed count stays within 2x of the mean
// (counts, not rates: robust on a loaded machine).
func TestEveryPartitionIsServed(t *testing.T) {
	const topic, group, parts = "t", "g", 8
	n := size(20_000, 10_000) // per partition
	c := startCluster(t, parts, topic)
	c.produce(t, topic, parts, n)

	var (
		mu    sync.Mutex
		first [parts]time.Time
		count [parts]int
		total int
	)
	l := newLedger()
	pl := startPipeline(t, c, l, pipeOpts{
		cfg: Config{Topics: []string{topic}, Group: group},
		hold: func(p pos, attempt int) {
			mu.Lock()
			if first[p.partition].IsZero() {
				first[p.partition] = time.Now()
			}
			count[p.partition]++
			total++
			k := total
			mu.Unlock()
			if k%20 == 0 {
				time.Sleep(time.Millisecond) // the throttle: at most ~20k records/s
			}
		},
	})
	defer pl.stopNow(t)
	var assigned time.Time
	waitFor(t, "the assignment", func() bool {
		if pl.spout.Stats().Assigned == parts {
			assigned = time.Now()
			return true
		}
		return false
	})
	want := 4 * parts * 500 // a few buffers' worth of every partition
	waitFor(t, "records processed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return total >= want
	})
	mu.Lock()
	defer mu.Unlock()
	mean := float64(total) / parts
	for p := range parts {
		if first[p].IsZero() || first[p].Sub(assigned) > time.Second {
			t.Errorf("partition %d: first record processed %v after the assignment (want within 1s)", p, first[p].Sub(assigned))
		}
		if c := float64(count[p]); c < mean/2 || c > 2*mean {
			t.Errorf("partition %d: %d records processed, mean %.0f: not within 2x", p, count[p], mean)
		}
	}
	st := pl.spout.Stats()
	t.Logf("processed per partition %v (mean %.0f); fetched %d, hold-backs %d, pauses %d", count, mean, st.Fetched, st.HoldBacks, st.Pauses)
}
