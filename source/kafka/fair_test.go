package kafka

import (
	"sync"
	"testing"
	"time"
)

// Every assigned partition is served: with 8 partitions full of small
// records (each fetch holds thousands of one partition's records) and a
// worker slower than fetching, every partition's first record is
// processed within the first quarter of the records the test waits for
// (a spout draining one partition's buffered backlog before the next
// would process thousands of one partition first), and while the worker
// is behind each partition's processed count stays within 2x of the mean
// (counts, not rates or wall time: robust on a loaded machine).
func TestEveryPartitionIsServed(t *testing.T) {
	const topic, group, parts = "t", "g", 8
	n := size(20_000, 10_000) // per partition
	c := startFilled(t, topic, parts, n)

	var (
		mu    sync.Mutex
		first [parts]int // total processed when p's first record was
		count [parts]int
		total int
	)
	l := newLedger()
	pl := startPipeline(t, c, l, pipeOpts{
		cfg: Config{Topics: []string{topic}, Group: group},
		hold: func(p pos, attempt int) {
			mu.Lock()
			total++
			if count[p.partition] == 0 {
				first[p.partition] = total
			}
			count[p.partition]++
			k := total
			mu.Unlock()
			if k%20 == 0 {
				time.Sleep(time.Millisecond) // the throttle: at most ~20k records/s
			}
		},
	})
	defer pl.stopNow(t)
	waitFor(t, "the assignment", func() bool { return pl.spout.Stats().Assigned == parts })
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
		if first[p] == 0 || first[p] > want/4 {
			t.Errorf("partition %d: first record processed as record %d of all (want within the first %d)", p, first[p], want/4)
		}
		if c := float64(count[p]); c < mean/2 || c > 2*mean {
			t.Errorf("partition %d: %d records processed, mean %.0f: not within 2x", p, count[p], mean)
		}
	}
	st := pl.spout.Stats()
	t.Logf("processed per partition %v (mean %.0f), first record of each as record %v of all; fetched %d, pauses %d",
		count, mean, first, st.Fetched, st.Pauses)
}
