package bench

import (
	"testing"
)

func TestTopologyLevel(t *testing.T) {
	rep, err := Run(Config{Levels: []Level{LevelTopology}, Msgs: 6000, Reps: 2, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows, want acked and unacked", len(rep.Rows))
	}
	for i, impl := range []string{"acked", "unacked"} {
		r := rep.Rows[i]
		if r.Level != LevelTopology || r.Impl != impl || !r.Verified || r.TreesPerSec <= 0 ||
			r.Roots != 6000 || r.Msgs != 6000*(1+wcWords) || len(r.RepMsgsPerSec) != 2 {
			t.Errorf("row %d: %+v", i, r)
		}
	}
	if rep.Rows[0].P99Ns == nil || rep.Rows[1].P99Ns != nil {
		t.Error("latency: want it for the acked row only")
	}
}

func TestWCCorpusWant(t *testing.T) {
	c := newWCCorpus()
	for _, n := range []int{0, 1, wcSentences, wcSentences + 5, 3*wcSentences + 100} {
		total := 0
		for _, k := range c.want(n) {
			total += k
		}
		if total != n*wcWords {
			t.Errorf("want(%d) counts %d words, want %d", n, total, n*wcWords)
		}
	}
}
