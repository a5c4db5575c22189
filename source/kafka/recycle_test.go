package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/xorack/xorack/source/kafka/kafkatest"
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

// TestRecycleRecordsUnderFaults: RecycleRecords with the faults a record
// meets, on the engine's defaults but a short backoff: a panic in the
// bolt on a record's first attempt (replayed), poison records failing
// every attempt (dead-lettered, their value produced from the recycled
// pool's memory before the record goes back), and a stop mid-run with
// records in flight (failed as stopped, not recycled, replayed by the
// next member). No attempt ever reads a recycled record (one reads as
// offset 0 of no topic), every record is processed, and every dead
// letter carries its record's value.
func TestRecycleRecordsUnderFaults(t *testing.T) {
	const topic, dlq, group, parts = "rf", "rf-dlq", "rfg", 2
	n := size(1500, 300)
	c := startClusterWith(t, kafkatest.Config{Topics: []string{topic, dlq}, Partitions: parts})
	c.produce(t, topic, parts, n)
	poison := func(p pos) bool { return p.offset%97 == 5 }
	// The first attempt of a record halfway through partition 0 (neither
	// poison nor panicking) is held until the stop has failed what was in
	// flight, so that the stop is mid-run however fast the rest goes.
	h := newHolder(pos{topic, 0, int64(n / 2)})
	l := newLedger()
	opts := pipeOpts{
		cfg: Config{Topics: []string{topic}, Group: group, RecycleRecords: true, DeadLetterTopic: dlq},
		top: topology.Config{Retry: topology.RetryPolicy{MaxAttempts: 3}, Logger: quietLogger()},
		hold: func(p pos, attempt int) {
			h.hold(p, attempt)
			if p.offset%5 == 1 && attempt == 1 && !poison(p) {
				panic("a bug the first attempt hits")
			}
		},
		fail: func(p pos, _ int) error {
			if poison(p) {
				return errBad
			}
			return nil
		},
	}
	if held := h.at; poison(held) || held.offset%5 == 1 {
		t.Fatalf("the held record %v is poison or panics", held)
	}
	a := startPipeline(t, c, l, opts)
	h.wait(t)
	released := make(chan struct{})
	go func() { // not the test's goroutine: no t.Fatal here
		defer close(released)
		defer close(h.release)
		for deadline := time.Now().Add(testTimeout); a.spout.Stats().Stopped == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond) // polling the condition the record is held for
		}
	}()
	a.stopNow(t)
	<-released
	b := startPipeline(t, c, l, opts)
	c.waitCaughtUp(t, group, topic)
	b.stop(t)

	for p := range int32(parts) {
		for i := range n {
			if at := (pos{topic, p, int64(i)}); !poison(at) && l.count(at) == 0 {
				t.Errorf("record %v never processed", at)
			}
		}
	}
	if k := len(l.attemptsOf(pos{})); k != 0 {
		t.Errorf("%d attempts read a recycled record (no topic, offset 0)", k)
	}
	want := 0
	for i := range n {
		if poison(pos{offset: int64(i)}) {
			want += parts
		}
	}
	dead := c.readUntil(t, dlq, func(got []*kgo.Record) bool { return len(got) >= want })
	for _, r := range dead {
		var p int32
		var off int
		for _, h := range r.Headers {
			switch h.Key {
			case "xorack-partition":
				fmt.Sscan(string(h.Value), &p)
			case "xorack-offset":
				fmt.Sscan(string(h.Value), &off)
			}
		}
		if got := string(r.Value); got != sentence(p, off) {
			t.Errorf("dead letter of %d@%d carries %q, want %q", p, off, got, sentence(p, off))
		}
	}
	if st := a.spout.Stats(); st.Stopped == 0 {
		t.Errorf("the stop mid-run left nothing in flight (stats %+v): the test did not stop mid-run", st)
	}
}
