package bench

// The faults level's components: the split bolt that fails, poisons or
// panics on cue, the count bolt that drops an ACK, slows down or joins,
// the spouts that feed them, the sink, and the log handler that counts
// the engine's lines.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/topology"
)

type faultSplit struct{ r *faultRun }

func (b faultSplit) Execute(t *topology.Tuple, c *topology.BoltCollector) {
	r := b.r
	id := t.Int(1)
	fail, panics := r.injects(id, t.Attempt())
	for i, w := range strings.Fields(t.String(0)) {
		if panics && i == wcWords/2 {
			// Half the words are on their way: the engine fails the
			// attempt (the words' ACKs then come late) and replays it.
			r.injected[id].Add(1)
			r.panics.Add(1)
			panic(fmt.Sprintf("bench: injected panic, sentence %d attempt %d", id, t.Attempt()))
		}
		_ = c.Emit(t, w, id)
	}
	if fail {
		r.injected[id].Add(1)
		_ = c.Fail(t, errInjectedFault)
		return
	}
	_ = c.Ack(t)
}

// injects reports what the injection does to attempt of sentence id:
// fail it after its emits (poison, or the fail rate), or panic halfway
// through them (the panic rate).
func (r *faultRun) injects(id, attempt int) (fail, panics bool) {
	if r.fc.panic > 0 && chance(r.seed, id, attempt, saltPanic) < r.fc.panic {
		return false, true
	}
	return r.poison(id) || r.fc.fail > 0 && chance(r.seed, id, attempt, saltFail) < r.fc.fail, false
}

var errInjectedFault = errors.New("bench: injected failure")

type faultCount struct {
	r      *faultRun
	counts map[string]int
	held   []*topology.Tuple // join: the words since the last tick
}

func (b *faultCount) Execute(t *topology.Tuple, c *topology.BoltCollector) {
	r := b.r
	if r.fc.join {
		b.join(t, c)
		return
	}
	if r.fc.slow {
		if now := int64(time.Since(r.t0)); now >= r.slowFrom.Load() && now < r.slowUntil.Load() {
			spin(r.slowSpin)
		}
	}
	b.counts[t.String(0)]++
	id := t.Int(1)
	if r.words != nil {
		r.words[wordsAt(id, t.Attempt())].Add(1)
	}
	// One word of a dropped sentence is never acked, on its first
	// attempt: the tree times out and the replay completes.
	if r.fc.drop > 0 && t.Attempt() == 1 && chance(r.seed, id, 1, saltDrop) < r.fc.drop && r.firstWord(id, t.String(0)) {
		return
	}
	_ = c.Ack(t)
}

// join is the join row's count bolt: it holds the words and, on a
// tick, emits one tuple anchored to each pair of them (the last alone
// when their number is odd) and acks them.
func (b *faultCount) join(t *topology.Tuple, c *topology.BoltCollector) {
	if t.Source() != "clock" {
		b.counts[t.String(0)]++
		b.held = append(b.held, t)
		return
	}
	for i := 0; i < len(b.held); i += 2 {
		pair := b.held[i:min(i+2, len(b.held))]
		_ = c.EmitMulti(pair, pair[0].String(0))
		for _, w := range pair {
			_ = c.Ack(w)
		}
	}
	clear(b.held)
	b.held = b.held[:0]
}

// clockSpout emits an untracked tick every faultsTick until every
// sentence ended: the clock the join row's join flushes on.
type clockSpout struct {
	ended func() bool
	last  time.Time
}

func (s *clockSpout) Next(col *topology.SpoutCollector) {
	if s.ended() {
		col.Done()
		return
	}
	if time.Since(s.last) >= faultsTick {
		s.last = time.Now()
		_ = col.Emit(nil, 0)
	}
}
func (*clockSpout) Ack(any)                     {}
func (*clockSpout) Fail(any, *topology.Failure) {}

// firstWord reports whether w is the first word of sentence id.
func (r *faultRun) firstWord(id int, w string) bool {
	s := r.corpus.sentences[id%wcSentences]
	i := strings.IndexByte(s, ' ')
	return i < 0 && s == w || i >= 0 && s[:i] == w
}

// spin busy-waits for d (the slow bolt's extra work; a sleep would give
// up the processor, which is not what a slow bolt does).
func spin(d time.Duration) {
	for t := time.Now(); time.Since(t) < d; {
	}
}

// wordsAt is the index in faultRun.words of sentence id's attempt.
func wordsAt(id, attempt int) int {
	return id*topology.DefaultMaxAttempts + min(max(attempt, 1), topology.DefaultMaxAttempts) - 1
}

// faultSpout emits sentences [0, n) with their index as message id and
// records each one's final outcome. With stopAt > 0 it closes stopCh
// once it has emitted stopAt sentences (the stop row's cue).
type faultSpout struct {
	r       *faultRun
	n, next int
	acked   []atomic.Int32
	dead    []atomic.Int32
	stopped []atomic.Int32 // Fail with ackcore.ReasonStopped
	acks    atomic.Int64   // Ack calls so far (read by the stop row's goroutine too)
	ended   atomic.Int64   // sentences with their final outcome
	stopAt  int
	stopCh  chan struct{}
	// Written on the spout's goroutine, read after Stop.
	emitEnd    time.Duration // when the last first attempt was emitted, since t0
	ackedByEnd int           // Ack calls by then
}

func (s *faultSpout) Next(col *topology.SpoutCollector) {
	if s.next == s.n {
		col.Done()
		return
	}
	_ = col.Emit(s.next, s.r.corpus.sentences[s.next%wcSentences], s.next)
	if s.next++; s.next == s.n {
		s.emitEnd, s.ackedByEnd = time.Since(s.r.t0), int(s.acks.Load())
	}
	if s.next == s.stopAt {
		close(s.stopCh)
	}
}
func (s *faultSpout) Ack(id any) {
	s.acked[id.(int)].Add(1)
	s.acks.Add(1)
	s.ended.Add(1)
}
func (s *faultSpout) Fail(id any, f *topology.Failure) {
	s.ended.Add(1)
	if f.Reason == ackcore.ReasonStopped {
		s.stopped[id.(int)].Add(1)
		return
	}
	s.dead[id.(int)].Add(1)
}

// faultSink acks the join's tuples.
type faultSink struct{}

func (faultSink) Execute(t *topology.Tuple, c *topology.BoltCollector) { _ = c.Ack(t) }

// lineCounter is a slog.Handler that counts the records it gets: the
// panic row's Config.Logger, so the engine's panic log lines are counted
// (and checked against its rate limit) rather than printed.
type lineCounter struct{ n *atomic.Int64 }

func (lineCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h lineCounter) Handle(context.Context, slog.Record) error {
	h.n.Add(1)
	return nil
}
func (h lineCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h lineCounter) WithGroup(string) slog.Handler      { return h }
