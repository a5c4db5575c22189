package kafka

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/xorack/xorack/topology"
)

// TestRecycleRecords: under Config.RecycleRecords the spout gives each
// record back to the client's pool once it is done, not before: a record
// whose first attempt failed is read again, intact, by its replay, and
// the batches whose records are all done come back to the pool. A record
// recycled at its failure reads as zero on its replay (no position, no
// words); one never recycled returns no batch.
func TestRecycleRecords(t *testing.T) {
	const topic, group, parts = "recycle", "rc", 3
	n := size(2000, 300)
	c := startFilled(t, topic, parts, n)
	l := newLedger()
	failFirst := func(p pos, attempt int) error {
		if p.offset%3 == 0 && attempt == 1 {
			return errors.New("first attempt of every third record")
		}
		return nil
	}
	pl := startPipeline(t, c, l, pipeOpts{cfg: Config{Topics: []string{topic}, Group: group, RecycleRecords: true,
		Opts: []kgo.Opt{kgo.FetchMaxPartitionBytes(4 << 10)}}, fail: failFirst})
	c.waitCaughtUp(t, group, topic)
	pl.stop(t)
	if dups := l.checkAll(t, topic, parts, n); dups != 0 {
		t.Errorf("%d records processed twice", dups)
	}
	want := map[string]int{}
	for p := range int32(parts) {
		for i := range n {
			for _, w := range strings.Fields(sentence(p, i)) {
				want[w]++
			}
		}
	}
	l.mu.Lock()
	for w, k := range want {
		if l.words[w] != k {
			t.Errorf("word %q seen %d times, want %d", w, l.words[w], k)
		}
	}
	l.mu.Unlock()
	pl.spout.pool.mu.Lock()
	returned := pl.spout.pool.returned
	pl.spout.pool.mu.Unlock()
	if returned == 0 {
		t.Errorf("no batch came back to the pool after %d records done", parts*n)
	}
	if st := pl.spout.Stats(); st.Completed != uint64(parts*n) {
		t.Errorf("completed %d, want %d", st.Completed, parts*n)
	}
}

// TestRecycleRecordsAtMostOnce: an at-most-once topology acks its spout at
// emit, before the bolts read the record, so Open refuses RecycleRecords
// there, naming it.
func TestRecycleRecordsAtMostOnce(t *testing.T) {
	c := startFilled(t, "amo", 1, 10)
	sp, err := New(Config{Brokers: c.k.Addrs(), Topics: []string{"amo"}, Group: "amo", RecycleRecords: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	top := sinkTopology(t, sp, topology.Config{AtMostOnce: true})
	err = top.Start()
	if err == nil {
		top.Stop(context.Background())
		t.Fatal("an at-most-once topology started a spout with RecycleRecords")
	}
	if !strings.Contains(err.Error(), "RecycleRecords") || !strings.Contains(err.Error(), "AtMostOnce") {
		t.Errorf("error %q does not name RecycleRecords and AtMostOnce", err)
	}
}
