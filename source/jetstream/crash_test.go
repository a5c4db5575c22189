package jetstream

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xorack/xorack/topology"
)

var crashCorpus = []string{
	"the cow jumped over the moon",
	"an apple a day keeps the doctor away",
	"four score and seven years ago",
	"snow white and the seven dwarfs",
	"a stitch in time saves nine",
}

// wordLedger is the crash test's sink, shared by both pipelines as a
// database would be: per stream sequence, how many times the message was
// fully split and counted, the words counted for it, and the highest
// attempt seen.
type wordLedger struct {
	mu        sync.Mutex
	processed map[uint64]int
	words     map[uint64]map[string]int // seq -> word -> times counted
	attempt   map[uint64]int
}

func (l *wordLedger) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.processed {
		n += c
	}
	return n
}

// wordCount adds split (failing a fraction fail of its inputs, at random;
// hold, when not nil, called first on each input) and count (recording
// each message's words in l) to b.
func wordCount(l *wordLedger, fail float64, seed uint64, hold func()) func(b *topology.Builder) {
	return func(b *topology.Builder) {
		b.Bolt("split", func() topology.Bolt {
			rng := rand.New(rand.NewPCG(seed, 1))
			return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, c *topology.BasicCollector) error {
				if hold != nil {
					hold()
				}
				if rng.Float64() < fail {
					return errInjected
				}
				pos := t.Value(0).(Position)
				words := strings.Fields(string(t.Value(1).([]byte)))
				for i, w := range words {
					if err := c.Emit(w, pos, i == len(words)-1); err != nil {
						return err
					}
				}
				return nil
			}))
		}).Tasks(2).Input("js", topology.Shuffle()).Output("word", "pos", "last")
		b.Bolt("count", func() topology.Bolt {
			return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, c *topology.BasicCollector) error {
				pos := t.Value(1).(Position)
				l.mu.Lock()
				defer l.mu.Unlock()
				m := l.words[pos.Seq]
				if m == nil {
					m = map[string]int{}
					l.words[pos.Seq] = m
				}
				m[t.String(0)]++
				l.attempt[pos.Seq] = max(l.attempt[pos.Seq], t.Attempt())
				if t.Value(2).(bool) {
					l.processed[pos.Seq]++
				}
				return nil
			}))
		}).Input("split", topology.Global())
	}
}

// TestCrashAndRestart runs the word count over a stream with 1% of the
// split bolt's inputs failing, kills the pipeline at a random point
// without a clean shutdown (its connection closed, its in-flight messages
// never answered), and starts a new one on the same durable consumer. At
// the end every message was processed at least once, and the consumer has
// nothing left: its ack floor at the last message, nothing pending.
func TestCrashAndRestart(t *testing.T) {
	n := size(3000, 1000)
	const ackWait = time.Second
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 2))
	killAt := n/4 + rng.IntN(n/2)
	t.Logf("seed %d: %d messages, kill after %d processed", seed, n, killAt)

	e := newEnv(t)
	e.stream("S", n, func(i int) string { return crashCorpus[i%len(crashCorpus)] })
	e.consumer("S", ConsumerConfig("wc", ackWait, 0))
	l := &wordLedger{processed: map[uint64]int{}, words: map[uint64]map[string]int{}, attempt: map[uint64]int{}}
	cfg := testTopology()
	cfg.MaxSpoutPending = 256
	cfg.Retry = topology.RetryPolicy{MaxAttempts: 8, Backoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}

	// The first pipeline, on a connection of its own.
	nc1, js1 := e.connect()
	p1 := start(t, cfg, Config{JetStream: js1, Stream: "S", Consumer: "wc", FetchWait: 100 * time.Millisecond}, 2, wordCount(l, 0.01, seed, nil))
	waitFor(t, "the kill point", func() bool { return l.total() >= killAt }, nil)
	nc1.Close() // the crash: nothing this pipeline sends from now on reaches the server
	p1.stop(t)  // only to free its goroutines; its replies all fail
	st1 := p1.stats()
	before := e.info("S", "wc")
	t.Logf("killed: %d processed; pipeline 1 %+v; consumer: %s", l.total(), st1, describe(before))
	if before.NumAckPending == 0 && before.NumPending == 0 {
		t.Fatalf("the kill came too late to test anything: %s", describe(before))
	}

	// The second pipeline, on the same durable consumer.
	_, js2 := e.connect()
	p2 := start(t, cfg, Config{JetStream: js2, Stream: "S", Consumer: "wc", FetchWait: 100 * time.Millisecond}, 2, wordCount(l, 0.01, seed+1, nil))
	restarted := time.Now()
	info := e.waitSettled("S", "wc", uint64(n))
	p2.stop(t)
	st2 := p2.stats()

	l.mu.Lock()
	defer l.mu.Unlock()
	dups, missing := 0, 0
	for seq := uint64(1); seq <= uint64(n); seq++ {
		switch c := l.processed[seq]; {
		case c == 0:
			missing++
			if missing <= 10 {
				t.Errorf("message %d never processed", seq)
			}
		case c > 1:
			dups += c - 1
		}
	}
	if missing > 0 || st2.DeadLettered != 0 {
		t.Errorf("%d messages never processed, %d dead-lettered", missing, st2.DeadLettered)
	}
	// Each completion counted its sentence's words once (a split that
	// fails emits nothing).
	again := 0
	for seq := uint64(1); seq <= uint64(n); seq++ {
		want := map[string]int{}
		for _, w := range strings.Fields(crashCorpus[int(seq)%len(crashCorpus)]) {
			want[w] += l.processed[seq]
		}
		if got := l.words[seq]; len(got) != len(want) && l.processed[seq] > 0 {
			t.Errorf("message %d, processed %d times, counted %v", seq, l.processed[seq], got)
		} else {
			for w, c := range want {
				if got[w] != c {
					t.Errorf("message %d, processed %d times, counted %q %d times; want %d", seq, l.processed[seq], w, got[w], c)
				}
			}
		}
		if l.attempt[seq] > 1 {
			again++
		}
	}
	t.Logf("restart settled in %v: %d messages, %d duplicates, %d processed again as a later attempt; pipeline 2 %+v; consumer: %s",
		time.Since(restarted).Round(time.Millisecond), n, dups, again, st2, describe(info))
	// The messages in flight at the crash came back as a later attempt.
	if again < int(before.NumAckPending)/2 {
		t.Errorf("%d messages processed at an attempt past 1; %d were in flight at the crash", again, before.NumAckPending)
	}
}

// TestCleanStopAndRestartReprocessesNothing: the word count is stopped
// cleanly mid-run, messages in flight, and restarted on the same durable
// consumer. Stop drains (no new messages, the pending trees finish and
// are acked; what was fetched and never emitted is handed back), so no
// message is processed twice.
func TestCleanStopAndRestartReprocessesNothing(t *testing.T) {
	n := size(2000, 1000)
	e := newEnv(t)
	e.stream("S", n, func(i int) string { return crashCorpus[i%len(crashCorpus)] })
	e.consumer("S", ConsumerConfig("wc", 30*time.Second, 0))
	l := &wordLedger{processed: map[uint64]int{}, words: map[uint64]map[string]int{}, attempt: map[uint64]int{}}
	cfg := testTopology()
	cfg.MaxSpoutPending = 64
	scfg := Config{JetStream: e.js, Stream: "S", Consumer: "wc", FetchWait: 100 * time.Millisecond}
	// The split bolt holds every input past the first n/3 until the drain
	// has begun (beginDrain), so that the stop is mid-run however fast the
	// rest goes.
	gate := make(chan struct{})
	var inputs atomic.Uint64
	hold := func() {
		if inputs.Add(1) > uint64(n/3) {
			<-gate
		}
	}
	p1 := start(t, cfg, scfg, 2, wordCount(l, 0, 1, hold))
	waitFor(t, "the first pipeline mid-run, its split bolt held", func() bool { return inputs.Load() > uint64(n/3) }, nil)
	p1.stopped = true
	beginDrain(p1.top)
	stopErr := make(chan error)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		stopErr <- p1.top.Stop(ctx)
	}()
	close(gate) // the trees in flight finish during the drain
	if err := <-stopErr; err != nil {
		t.Fatal(err)
	}
	st1 := p1.stats()
	stopped := p1.top.Metrics().Component("js").FailedStopped
	if done := l.total(); done >= n || stopped != 0 {
		t.Fatalf("first pipeline: %d of %d processed, %d stopped: want a mid-run stop with nothing stopped", done, n, stopped)
	}
	p2 := start(t, cfg, scfg, 2, wordCount(l, 0, 2, nil))
	e.waitSettled("S", "wc", uint64(n))
	p2.stop(t)
	l.mu.Lock()
	defer l.mu.Unlock()
	dups := 0
	for seq := uint64(1); seq <= uint64(n); seq++ {
		switch c := l.processed[seq]; {
		case c == 0:
			t.Errorf("message %d never processed", seq)
		case c > 1:
			dups += c - 1
		}
	}
	if dups != 0 {
		t.Errorf("%d messages processed twice after a clean stop and restart", dups)
	}
	t.Logf("first pipeline %+v", st1)
}
