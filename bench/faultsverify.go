package bench

import (
	"fmt"
	"time"

	"github.com/xorack/xorack/topology"
)

// The faults level's verification, apart from the run so that its tests
// can feed it wrong counts.

// faultsPanicLogEvery is the engine's documented limit on panic log
// lines: at most one per component per 10 s.
const faultsPanicLogEvery = 10 * time.Second

// sentenceEnd is one sentence's record after a rep: the spout's
// callbacks for it and what the injection and the count bolt saw.
type sentenceEnd struct {
	acked, dead, stopped int32 // Ack calls, Fail calls (dead letters), Fail calls with reason stopped
	injected             int   // attempts the injection failed or panicked
	poison               bool
	// tracked: the count bolt counted this sentence's words per attempt
	// (the panic and stop rows); then complete says an attempt the
	// injection left alone had its wcWords words counted, and twice that
	// an attempt had more (a word processed twice).
	tracked, complete, twice bool
}

// sentenceTally is what verifySentences counted.
type sentenceTally struct {
	healthy, healthyDead, poisonDead, stopped int
}

// verifySentences checks a rep's sentences, of which the spout emitted
// [0, emitted): each emitted one ended exactly once (acked, dead-lettered
// or, where stopOK, reported stopped), none after emitted ended, no
// poison sentence was acked, and (where tracked) no sentence was acked
// unless an attempt the injection left alone was fully processed, and no
// word was processed twice in one attempt. A healthy sentence
// dead-lettered (one with an attempt the injection did not fail) is
// counted, not listed: the caller reports it with the rep's failures.
func verifySentences(ends []sentenceEnd, emitted int, stopOK bool) (sentenceTally, []string) {
	var t sentenceTally
	var bad []string
	note := func(format string, a ...any) {
		if len(bad) < 5 {
			bad = append(bad, fmt.Sprintf(format, a...))
		}
	}
	for id, e := range ends {
		if e.twice {
			note("sentence %d: an attempt's words counted more than once", id)
		}
		if id >= emitted {
			if e.acked+e.dead+e.stopped > 0 {
				note("sentence %d never emitted (the spout emitted %d), yet %d acks, %d dead letters, %d stopped", id, emitted, e.acked, e.dead, e.stopped)
			}
			continue
		}
		switch {
		case e.acked == 1 && e.dead == 0 && e.stopped == 0:
			switch {
			case e.poison:
				note("poison sentence %d acked", id)
			case e.tracked && !e.complete:
				note("sentence %d acked, but no attempt of it had its %d words counted", id, wcWords)
			default:
				t.healthy++
			}
		case e.acked == 0 && e.dead == 1 && e.stopped == 0:
			if e.poison {
				t.poisonDead++
			} else if e.injected < topology.DefaultMaxAttempts {
				t.healthyDead++
			}
		case e.acked == 0 && e.dead == 0 && e.stopped == 1 && stopOK:
			t.stopped++
		default:
			note("sentence %d: %d acks, %d dead letters, %d stopped", id, e.acked, e.dead, e.stopped)
		}
	}
	return t, bad
}

// verifyPanics checks the engine's panic handling against the injection
// over a rep of d: every injected panic was recovered and counted (the
// split bolt's Panics) and failed its attempt with reason panic (the
// spout's FailedPanic, so that it was replayed), and the engine logged
// them at least once and at most once per faultsPanicLogEvery.
func verifyPanics(injected, recovered, failedPanic, logLines int64, d time.Duration) []string {
	var bad []string
	if recovered != injected {
		bad = append(bad, fmt.Sprintf("%d panics injected, the split bolt counts %d recovered", injected, recovered))
	}
	if failedPanic != injected {
		bad = append(bad, fmt.Sprintf("%d panics injected, %d attempts failed with reason panic", injected, failedPanic))
	}
	if most := 1 + int64(d/faultsPanicLogEvery); injected > 0 && (logLines < 1 || logLines > most) || injected == 0 && logLines > 0 {
		bad = append(bad, fmt.Sprintf("%d panics over %v logged in %d lines, want 1 to %d", injected, d.Round(time.Millisecond), logLines, most))
	}
	return bad
}

// fullyProcessed reports, from the count bolt's words per attempt of one
// sentence (words[k]: attempt k+1), whether an attempt the injection left
// alone (clean(k+1)) had all its words counted, and whether any attempt
// had more than all of them.
func fullyProcessed(words []int32, clean func(attempt int) bool) (complete, twice bool) {
	for k, w := range words {
		complete = complete || w == wcWords && clean(k+1)
		twice = twice || w > wcWords
	}
	return complete, twice
}
