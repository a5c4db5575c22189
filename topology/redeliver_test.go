package topology

import (
	"sync"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// brokerSpout stands in for a broker that redelivers: message ids [0, n),
// each with a delivery count. A failed attempt goes back to the queue as
// the next delivery (at once: the delay is the broker's business, and the
// test records the one the policy asks for); at the policy's last attempt
// the spout gives the message up itself.
type brokerSpout struct {
	mu        *sync.Mutex
	queue     []int       // ids due for delivery
	delivered map[int]int // id -> deliveries so far
	fails     map[int][]Failure
	delays    map[int][]time.Duration
	acked     map[int]int
	dead      map[int]bool
	retry     RetryPolicy
}

func (s *brokerSpout) Open(ctx TaskContext) error {
	s.retry = ctx.Config().Retry
	return nil
}

func (s *brokerSpout) Next(c *SpoutCollector) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return
	}
	id := s.queue[0]
	s.queue = s.queue[1:]
	s.delivered[id]++
	if err := c.Emit(id, id); err != nil {
		panic(err)
	}
}

func (s *brokerSpout) Attempt(msgID any) int {
	// Called inside Emit, under Next's lock.
	return s.delivered[msgID.(int)]
}

func (s *brokerSpout) Ack(msgID any) {
	s.mu.Lock()
	s.acked[msgID.(int)]++
	s.mu.Unlock()
}

func (s *brokerSpout) Fail(msgID any, f *Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := msgID.(int)
	s.fails[id] = append(s.fails[id], *f)
	if f.Reason == ackcore.ReasonStopped {
		return
	}
	if f.Attempts >= s.retry.MaxAttempts {
		s.dead[id] = true
		return
	}
	s.delays[id] = append(s.delays[id], s.retry.Delay(f.Attempts, 0))
	s.queue = append(s.queue, id)
}

// TestRedeliverer checks the engine's side of a spout whose source
// redelivers: one attempt per emit, numbered by the spout; every failed
// attempt reported to Fail with that number; no replay by the engine and
// no call of Config.DeadLetter; bolts see the source's attempt number.
func TestRedeliverer(t *testing.T) {
	const n = 300
	var mu sync.Mutex
	sp := &brokerSpout{mu: &mu, delivered: map[int]int{}, fails: map[int][]Failure{},
		delays: map[int][]time.Duration{}, acked: map[int]int{}, dead: map[int]bool{}}
	for id := range n {
		sp.queue = append(sp.queue, id)
	}
	seen := map[int][]int{} // id -> attempts the bolt saw, in order
	var seenMu sync.Mutex
	b := NewBuilder()
	b.Spout("broker", func() Spout { return sp }).Output("id")
	b.Bolt("flaky", func() Bolt {
		return Basic(BasicFunc(func(tp *Tuple, c *BasicCollector) error {
			id := tp.Int(0)
			seenMu.Lock()
			seen[id] = append(seen[id], tp.Attempt())
			seenMu.Unlock()
			switch {
			case id%5 == 0:
				return ErrFailed // always: given up at the last attempt
			case id%3 == 0 && tp.Attempt() < 3:
				return ErrFailed // the first two attempts
			}
			return nil
		}))
	}).Input("broker", Shuffle())
	cfg := testConfig()
	cfg.Retry = RetryPolicy{MaxAttempts: 3, MaxBackoff: time.Second}
	var engineDead int
	cfg.DeadLetter = func(DeadLetter) { engineDead++ }
	top := start(t, b, cfg)
	settled := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(sp.acked)+len(sp.dead) == n
	}
	waitFor(t, 20*time.Second, "every message acked or given up", settled)
	stop(t, top)

	if sp.retry.MaxAttempts != 3 || sp.retry.Backoff != 10*time.Millisecond || sp.retry.Jitter != 0.5 {
		t.Errorf("TaskContext.Config().Retry = %+v; want MaxAttempts 3 and the defaults filled", sp.retry)
	}
	for id := range n {
		wantAttempts := 1
		if id%5 == 0 || id%3 == 0 { // given up after 3, or through at the 3rd

			wantAttempts = 3
		}
		if got := seen[id]; len(got) != wantAttempts {
			t.Errorf("msg %d: bolt saw attempts %v, want %d of them", id, got, wantAttempts)
			continue
		}
		for k, a := range seen[id] {
			if a != k+1 {
				t.Errorf("msg %d: bolt saw attempts %v, want 1, 2, ...", id, seen[id])
				break
			}
		}
		fails := sp.fails[id]
		wantFails := wantAttempts - 1
		if id%5 == 0 {
			wantFails = 3
		}
		if len(fails) != wantFails {
			t.Errorf("msg %d: %d Fail calls, want %d", id, len(fails), wantFails)
			continue
		}
		for k, f := range fails {
			if f.Reason != ackcore.ReasonExplicit || f.Attempts != k+1 {
				t.Errorf("msg %d: Fail %d = %+v; want Explicit at attempt %d", id, k, f, k+1)
			}
		}
		for k, d := range sp.delays[id] {
			if want := 10 * time.Millisecond << k; d != want {
				t.Errorf("msg %d: delay after attempt %d = %v, want %v", id, k+1, d, want)
			}
		}
		if id%5 == 0 {
			if !sp.dead[id] || sp.acked[id] != 0 {
				t.Errorf("msg %d: dead %v, acked %d; want given up, never acked", id, sp.dead[id], sp.acked[id])
			}
		} else if sp.acked[id] != 1 || sp.dead[id] {
			t.Errorf("msg %d: acked %d times, dead %v; want acked once", id, sp.acked[id], sp.dead[id])
		}
	}
	m := top.Metrics().Component("broker")
	if m.Replayed != 0 || m.DeadLettered != 0 || engineDead != 0 {
		t.Errorf("engine replayed %d, dead-lettered %d (hook %d); want none for a Redeliverer", m.Replayed, m.DeadLettered, engineDead)
	}
	wantFailed := uint64(0)
	for _, f := range sp.fails {
		wantFailed += uint64(len(f))
	}
	if m.FailedExplicit != wantFailed || m.FailedFinal != wantFailed {
		t.Errorf("metrics: %d failed explicitly, %d Fail calls; want %d of each", m.FailedExplicit, m.FailedFinal, wantFailed)
	}
}

func TestRetryPolicyDelay(t *testing.T) {
	p := RetryPolicy{MaxAttempts: 5, Backoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Jitter: 0.5}
	for _, c := range []struct {
		k    int
		u    float64
		want time.Duration
	}{
		{1, 0, 10 * time.Millisecond},
		{2, 0, 20 * time.Millisecond},
		{4, 0, 80 * time.Millisecond},
		{5, 0, 100 * time.Millisecond}, // 160 ms, capped
		{1 << 20, 0, 100 * time.Millisecond},
		{1, 0.5, 7500 * time.Microsecond}, // less Jitter*u = a quarter
		{3, 0.999, 40*time.Millisecond - time.Duration(float64(40*time.Millisecond)*0.5*0.999)},
	} {
		if got := p.Delay(c.k, c.u); got != c.want {
			t.Errorf("Delay(%d, %v) = %v, want %v", c.k, c.u, got, c.want)
		}
	}
	none := p
	none.Jitter = 0
	if got := none.Delay(2, 0.9); got != 20*time.Millisecond {
		t.Errorf("without jitter Delay(2, 0.9) = %v, want 20ms", got)
	}
}
