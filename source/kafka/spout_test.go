package kafka

import (
	"testing"
)

// TestWordCount runs records through the word count and checks that every
// record was processed once and the group committed every partition to its
// end.
func TestWordCount(t *testing.T) {
	const topic, group, parts, n = "words", "wc", 3, 200
	c := startCluster(t, parts, topic)
	c.produce(t, topic, parts, n)
	l := newLedger()
	pl := startPipeline(t, c, l, pipeOpts{cfg: Config{Topics: []string{topic}, Group: group}})
	c.waitCaughtUp(t, group, topic)
	pl.stop(t)
	if dups := l.checkAll(t, topic, parts, n); dups != 0 {
		t.Errorf("%d duplicates without a fault", dups)
	}
	st := pl.spout.Stats()
	if st.Emitted != parts*n || st.Completed != parts*n || st.Commits == 0 {
		t.Errorf("stats %+v", st)
	}
}
