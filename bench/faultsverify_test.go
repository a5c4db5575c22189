package bench

import (
	"strings"
	"testing"
	"time"
)

// TestVerifySentences: the faults rows' verification passes a clean rep
// and fails each wrong count: an ack twice, an ack and a dead letter, a
// stopped sentence outside the stop row, an outcome for a sentence never
// emitted, an emitted sentence with no outcome, a poison sentence acked,
// a sentence acked though not fully processed, a word processed twice.
func TestVerifySentences(t *testing.T) {
	clean := func() []sentenceEnd {
		return []sentenceEnd{
			{acked: 1, tracked: true, complete: true},
			{dead: 1, injected: 5},               // dead-lettered by the injection: not healthy dead
			{dead: 1, poison: true, injected: 5}, // poison
			{stopped: 1, tracked: true},          // reported stopped (stop row)
			{acked: 1, injected: 1},              // acked on a replay
			{},                                   // never emitted
		}
	}
	tally, bad := verifySentences(clean(), 5, true)
	if len(bad) > 0 || tally != (sentenceTally{healthy: 2, poisonDead: 1, stopped: 1}) {
		t.Fatalf("clean rep: %+v %q", tally, bad)
	}
	if tally, _ := verifySentences([]sentenceEnd{{dead: 1, injected: 4}}, 1, false); tally.healthyDead != 1 {
		t.Errorf("a sentence dead-lettered with an attempt not failed by the injection: %+v, want 1 healthy dead", tally)
	}
	for _, tc := range []struct {
		name    string
		change  func([]sentenceEnd)
		emitted int
		stopOK  bool
		want    string
	}{
		{"acked twice", func(e []sentenceEnd) { e[0].acked = 2 }, 5, true, "sentence 0: 2 acks"},
		{"acked and dead", func(e []sentenceEnd) { e[4].dead = 1 }, 5, true, "sentence 4: 1 acks, 1 dead letters"},
		{"stopped outside the stop row", nil, 5, false, "sentence 3: 0 acks, 0 dead letters, 1 stopped"},
		{"no outcome", nil, 6, true, "sentence 5: 0 acks, 0 dead letters, 0 stopped"},
		{"outcome never emitted", func(e []sentenceEnd) { e[5].acked = 1 }, 5, true, "sentence 5 never emitted"},
		{"poison acked", func(e []sentenceEnd) { e[2].acked, e[2].dead = 1, 0 }, 5, true, "poison sentence 2 acked"},
		{"acked incomplete", func(e []sentenceEnd) { e[0].complete = false }, 5, true, "sentence 0 acked, but no attempt"},
		{"processed twice", func(e []sentenceEnd) { e[3].twice = true }, 5, true, "sentence 3: an attempt's words counted more than once"},
	} {
		ends := clean()
		if tc.change != nil {
			tc.change(ends)
		}
		_, bad := verifySentences(ends, tc.emitted, tc.stopOK)
		if len(bad) != 1 || !strings.Contains(bad[0], tc.want) {
			t.Errorf("%s: %q, want one error with %q", tc.name, bad, tc.want)
		}
	}
}

// TestVerifyPanics: every injected panic recovered, failed with reason
// panic and logged within the rate limit passes; a count off by one or a
// log line too many or missing fails.
func TestVerifyPanics(t *testing.T) {
	if bad := verifyPanics(500, 500, 500, 1, time.Second); len(bad) > 0 {
		t.Errorf("clean: %q", bad)
	}
	if bad := verifyPanics(0, 0, 0, 0, time.Second); len(bad) > 0 {
		t.Errorf("no panics: %q", bad)
	}
	if bad := verifyPanics(500, 500, 500, 3, 25*time.Second); len(bad) > 0 {
		t.Errorf("25 s, 3 lines: %q", bad)
	}
	for _, tc := range []struct {
		injected, recovered, failed, lines int64
		d                                  time.Duration
		want                               string
	}{
		{500, 499, 500, 1, time.Second, "split bolt counts 499 recovered"},
		{500, 500, 499, 1, time.Second, "499 attempts failed with reason panic"},
		{500, 500, 500, 2, time.Second, "logged in 2 lines, want 1 to 1"},
		{500, 500, 500, 0, time.Second, "logged in 0 lines"},
		{0, 0, 0, 1, time.Second, "0 panics over 1s logged in 1 lines"},
	} {
		bad := verifyPanics(tc.injected, tc.recovered, tc.failed, tc.lines, tc.d)
		if len(bad) != 1 || !strings.Contains(bad[0], tc.want) {
			t.Errorf("%+v: %q, want one error with %q", tc, bad, tc.want)
		}
	}
}

// TestFullyProcessed: an attempt the injection left alone with all its
// words counted makes a sentence complete; a failed attempt's full count
// does not, nor a clean attempt short of a word; more than all its words
// is a word processed twice.
func TestFullyProcessed(t *testing.T) {
	cleanFrom2 := func(attempt int) bool { return attempt >= 2 }
	for _, tc := range []struct {
		words           []int32
		complete, twice bool
	}{
		{[]int32{wcWords, wcWords, 0, 0, 0}, true, false},
		{[]int32{wcWords, wcWords - 1, 0, 0, 0}, false, false}, // the clean attempt lost a word
		{[]int32{wcWords, 0, 0, 0, 0}, false, false},           // only the failed attempt complete
		{[]int32{wcWords / 2, 0, wcWords, 0, 0}, true, false},
		{[]int32{0, wcWords + 1, 0, 0, 0}, false, true},
	} {
		if c, tw := fullyProcessed(tc.words, cleanFrom2); c != tc.complete || tw != tc.twice {
			t.Errorf("%v: complete %v twice %v, want %v %v", tc.words, c, tw, tc.complete, tc.twice)
		}
	}
}
