package topology

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xorack/xorack/ackcore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ledger records, per message id, every final outcome and every time a
// sink processed it, so a test can check that each message ended once.
type ledger struct {
	mu        sync.Mutex
	acked     map[int]int
	failed    map[int][]Failure
	dead      map[int][]DeadLetter
	processed map[int]int
	attempts  map[int]int // the highest attempt a sink saw
}

func newLedger() *ledger {
	return &ledger{acked: map[int]int{}, failed: map[int][]Failure{}, dead: map[int][]DeadLetter{},
		processed: map[int]int{}, attempts: map[int]int{}}
}

func (l *ledger) ack(id int) {
	l.mu.Lock()
	l.acked[id]++
	l.mu.Unlock()
}

func (l *ledger) fail(id int, f *Failure) {
	l.mu.Lock()
	l.failed[id] = append(l.failed[id], *f)
	l.mu.Unlock()
}

func (l *ledger) deadLetter(d DeadLetter) {
	l.mu.Lock()
	l.dead[d.MsgID.(int)] = append(l.dead[d.MsgID.(int)], d)
	l.mu.Unlock()
}

func (l *ledger) process(id, attempt int) {
	l.mu.Lock()
	l.processed[id]++
	l.attempts[id] = max(l.attempts[id], attempt)
	l.mu.Unlock()
}

// idSource starts a topology with spout "ids", which emits ids [0, n)
// on its "id" field and records their outcomes in a new ledger; the
// spout's declaration is returned for its tasks and executors.
func idSource(n int) (*ledger, *Builder, *Decl) {
	l := newLedger()
	b := NewBuilder()
	return l, b, b.Spout("ids", newIDSpout(l, n)).Output("id")
}

// idsToSink builds the smallest acking topology: idSource into a sink
// bolt that acks each id.
func idsToSink(n int) (*ledger, *Builder) {
	l, b, _ := idSource(n)
	b.Bolt("sink", func() Bolt { return nopBolt{} }).Input("ids", Shuffle())
	return l, b
}

// summary counts final outcomes.
type summary struct {
	completed, deadLettered, stopped, failedOther, duplicates, missing int
}

// check asserts that each of n messages ended exactly once: completed, or
// failed and dead-lettered (or stopped, when allowStopped), and reports
// duplicates (messages a sink processed more than once).
func (l *ledger) check(t *testing.T, n int, allowStopped bool) summary {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var s summary
	var bad []string
	for id := range n {
		a, f := l.acked[id], len(l.failed[id])
		switch {
		case a == 1 && f == 0:
			s.completed++
		case a == 0 && f == 1:
			switch fl := l.failed[id][0]; {
			case fl.Reason == ackcore.ReasonStopped && allowStopped:
				s.stopped++
			case len(l.dead[id]) == 1:
				s.deadLettered++
			default:
				s.failedOther++
				bad = append(bad, fmt.Sprintf("msg %d failed (%v) without a dead letter", id, fl.Reason))
			}
		case a == 0 && f == 0:
			s.missing++
			bad = append(bad, fmt.Sprintf("msg %d: no outcome", id))
		default:
			bad = append(bad, fmt.Sprintf("msg %d: %d acks, %d fails", id, a, f))
		}
		if len(l.dead[id]) > 1 {
			bad = append(bad, fmt.Sprintf("msg %d dead-lettered %d times", id, len(l.dead[id])))
		}
		if l.processed[id] > 1 {
			s.duplicates += l.processed[id] - 1
		}
	}
	for id := range l.acked {
		if id < 0 || id >= n {
			bad = append(bad, fmt.Sprintf("unknown msg %d acked", id))
		}
	}
	sort.Strings(bad)
	if len(bad) > 10 {
		bad = append(bad[:10], fmt.Sprintf("... and %d more", len(bad)-10))
	}
	for _, b := range bad {
		t.Error(b)
	}
	t.Logf("%d messages: %d completed, %d dead-lettered, %d stopped; %d duplicates processed",
		n, s.completed, s.deadLettered, s.stopped, s.duplicates)
	return s
}

// idSpout emits message ids [0, n) (split over its tasks) as (id, attempt)
// tuples with the id as message id, then calls Done.
type idSpout struct {
	l          *ledger
	n          int
	next, step int
	gate       func(id int) bool // when set, Next emits only ids it allows
}

func newIDSpout(l *ledger, n int) func() Spout {
	return func() Spout { return &idSpout{l: l, n: n} }
}

func (s *idSpout) Open(ctx TaskContext) error {
	s.next = ctx.Index
	s.step = len(ctx.ComponentTasks(ctx.Component))
	return nil
}

func (s *idSpout) Next(c *SpoutCollector) {
	if s.next >= s.n {
		c.Done()
		return
	}
	if s.gate != nil && !s.gate(s.next) {
		return
	}
	if err := c.Emit(s.next, s.next); err != nil {
		panic(err)
	}
	s.next += s.step
}

func (s *idSpout) Ack(id any)              { s.l.ack(id.(int)) }
func (s *idSpout) Fail(id any, f *Failure) { s.l.fail(id.(int), f) }

// waitDone waits for the topology's Done with a generous deadline.
func waitDone(t *testing.T, top *Topology, d time.Duration) {
	t.Helper()
	select {
	case <-top.Done():
	case <-time.After(d):
		m := top.Metrics()
		for _, c := range m.Components {
			t.Logf("%+v", c)
		}
		if m.Acker != nil {
			t.Logf("acker: %+v", *m.Acker)
		}
		// Where each executor, the spout and the acker wait: a hang is
		// read from the stacks, not rerun.
		buf := make([]byte, 1<<22)
		t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		t.Fatalf("topology not done after %v", d)
	}
}

func stop(t *testing.T, top *Topology) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := top.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// testConfig is a fast at-least-once config.
func testConfig() Config {
	return Config{MessageTimeout: 5 * time.Second, MaxSpoutPending: 256, Seed: 7,
		Retry: RetryPolicy{MaxAttempts: 10, Backoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}}
}
