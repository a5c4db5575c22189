package jetstream

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/topology"
)

// TestAckOnCompletion runs two spout tasks on one consumer: every message
// is processed once, at attempt 1, and acked (+ACK and nothing else), and
// the consumer ends with its ack floor at the last message.
func TestAckOnCompletion(t *testing.T) {
	const n = 300
	e, _ := newStream(t, n, 2*time.Second, 0)
	l := newLedger()
	p := start(t, testTopology(), Config{JetStream: e.js, Stream: "S", Consumer: "c"}, 2, func(b *topology.Builder) {
		b.Bolt("rec", recorder(l, nil)).Tasks(2).Input("js", topology.Shuffle())
	})
	waitFor(t, "every message acked", func() bool { return p.stats().Acked == n }, nil)
	info := e.waitSettled("S", "c", n)
	if info.NumRedelivered != 0 {
		t.Errorf("consumer: %s; want nothing redelivered", describe(info))
	}
	for seq := uint64(1); seq <= n; seq++ {
		if a := l.get(seq); len(a) != 1 || a[0] != 1 {
			t.Errorf("message %d: attempts %v, want [1]", seq, a)
		}
	}
	waitFor(t, "the monitor to see every ack", func() bool { return len(e.mon.all("+ACK")) == n }, nil)
	if all := e.mon.all(); len(all) != n {
		t.Errorf("%d replies, want %d acks only", len(all), n)
	}
	p.stop(t)
	if st := p.stats(); st.Emitted != n || st.Fetched != n || st.NakedStopped != 0 || st.Held != 0 || st.ReplyErrors != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestNakWithDelayRedelivers fails some attempts: each failed attempt is
// answered with a Nak carrying the retry policy's delay (never a bare
// Nak), and the server redelivers the message as the next attempt no
// sooner than that.
func TestNakWithDelayRedelivers(t *testing.T) {
	const n = 20
	e, _ := newStream(t, n, 2*time.Second, 0)
	l := newLedger()
	cfg := testTopology()
	cfg.Retry = topology.RetryPolicy{MaxAttempts: 5, Backoff: 100 * time.Millisecond, MaxBackoff: time.Second, Jitter: -1}
	// Even messages fail attempt 1, multiples of 4 attempt 2 as well.
	fail := func(seq uint64, attempt int) bool { return seq%2 == 0 && attempt == 1 || seq%4 == 0 && attempt == 2 }
	p := start(t, cfg, Config{JetStream: e.js, Stream: "S", Consumer: "c"}, 1, func(b *topology.Builder) {
		b.Bolt("rec", recorder(l, fail)).Input("js", topology.Shuffle())
	})
	e.waitSettled("S", "c", n)
	p.stop(t)

	for seq := uint64(1); seq <= n; seq++ {
		want := 1 // attempts: until one does not fail
		for fail(seq, want) {
			want++
		}
		a := l.get(seq)
		if len(a) != want || !consecutive(a) {
			t.Errorf("message %d: attempts %v, want 1 ... %d", seq, a, want)
			continue
		}
		for k := 1; k < len(a); k++ {
			// Redelivered no sooner than the delay after the failure
			// (the Nak left after it).
			delay := 100 * time.Millisecond << (k - 1)
			if gap := l.at[seq][k].Sub(l.failedAt[seq][k-1]); gap < delay {
				t.Errorf("message %d: attempt %d came %v after attempt %d failed, before the delay %v", seq, k+1, gap, k, delay)
			}
		}
	}
	naks := e.mon.all("-NAK")
	if want := n/2 + n/4; len(naks) != want {
		t.Errorf("%d Naks, want %d", len(naks), want)
	}
	for _, r := range naks {
		if want := 100 * time.Millisecond << (r.delivered - 1); r.delay != want {
			t.Errorf("Nak of message %d, delivery %d: delay %v, want %v (bare Naks are never sent for a failure)", r.seq, r.delivered, r.delay, want)
		}
	}
	for _, r := range e.mon.all("+ACK") {
		if a := l.get(r.seq); r.delivered != len(a) {
			t.Errorf("message %d acked at delivery %d, processed %d times", r.seq, r.delivered, len(a))
		}
	}
	if st := p.stats(); st.Naked != uint64(n/2+n/4) || st.Acked != n || st.DeadLettered != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestInProgressKeepsLongTreeAlive holds one message's tree for over two
// AckWaits and two MessageTimeouts, the bolt RESETting it: the spout keeps
// the message alive with InProgress, the server never redelivers it, and
// it is acked once at the end.
func TestInProgressKeepsLongTreeAlive(t *testing.T) {
	const ackWait = 900 * time.Millisecond
	e, _ := newStream(t, 1, ackWait, 0)
	cfg := testTopology()
	cfg.MessageTimeout = 600 * time.Millisecond
	cfg.ResetCap = time.Minute
	h := &holder{}
	cmds := make(chan string)
	p := start(t, cfg, Config{JetStream: e.js, Stream: "S", Consumer: "c"}, 1, withHolder(h, cmds))
	waitFor(t, "the message to be held", func() bool { _, seen, _ := h.state(); return seen == 1 }, nil)
	began := time.Now()
	// RESET the tree every 100 ms for two and a half AckWaits (the
	// workload: a tree that long, not a synchronisation).
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for time.Since(began) < 5*ackWait/2 {
		<-tick.C
		cmds <- "reset"
	}
	held := time.Since(began)
	cmds <- "ack"
	waitFor(t, "the ack", func() bool { return p.stats().Acked >= 1 }, nil)
	info := e.waitSettled("S", "c", 1)
	p.stop(t)

	if _, seen, _ := h.state(); seen != 1 || info.NumRedelivered != 0 {
		t.Errorf("the message was executed %d times, redelivered %d times; want once, never", seen, info.NumRedelivered)
	}
	for _, r := range e.mon.all() {
		if r.kind != "+WPI" && r.kind != "+ACK" || r.delivered != 1 {
			t.Errorf("reply %+v; want only InProgress and one Ack, on delivery 1", r)
		}
	}
	if acks, wpi := e.mon.count("+ACK", 1), e.mon.count("+WPI", 1); acks != 1 || wpi < 3 {
		t.Errorf("%d acks, %d InProgress; want 1 and at least 3 (one per AckWait/2)", acks, wpi)
	}
	m := p.top.Metrics().Component("js")
	if m.FailedFinal != 0 || held < 2*cfg.MessageTimeout {
		t.Errorf("held %v (MessageTimeout %v), %d failures; want held past the timeout, never failed", held, cfg.MessageTimeout, m.FailedFinal)
	}
	t.Logf("held %v with %d RESETs and %d InProgress (AckWait %v)", held, h.resets, p.stats().InProgress, ackWait)
}

// TestTimeoutNaksAndRedelivers is the counterpart: a tree nobody RESETs
// times out in the engine, the spout stops keeping it alive and Naks it
// with the policy's delay, and it comes back as attempt 2. The engine's
// clock is a fake one, moved past the timeout once the first attempt is
// with the bolt and stopped there: the second attempt, acked at once,
// cannot time out however late a busy machine runs it (on the wall
// clock's 300 ms it could, and come back as a third).
func TestTimeoutNaksAndRedelivers(t *testing.T) {
	e, _ := newStream(t, 1, 5*time.Second, 0)
	cfg := testTopology()
	clock := &ackcore.FakeClock{}
	cfg.Clock = clock
	cfg.MessageTimeout = 300 * time.Millisecond
	var mu sync.Mutex
	var attempts []int
	p := start(t, cfg, Config{JetStream: e.js, Stream: "S", Consumer: "c"}, 1, func(b *topology.Builder) {
		b.Bolt("drop", func() topology.Bolt {
			return boltFunc(func(tp *topology.Tuple, c *topology.BoltCollector) {
				mu.Lock()
				attempts = append(attempts, tp.Attempt())
				mu.Unlock()
				if tp.Attempt() > 1 {
					c.Ack(tp) // the first attempt is lost: never acked
				}
			})
		}).Input("js", topology.Shuffle())
	})
	waitFor(t, "the first attempt with the bolt and its INIT applied", func() bool {
		mu.Lock()
		n := len(attempts)
		mu.Unlock()
		a := p.top.Metrics().Acker
		return n == 1 && a != nil && a.Inits == 1
	}, nil)
	clock.Set(time.Second)
	e.waitSettled("S", "c", 1)
	p.stop(t)
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 2 || attempts[0] != 1 || attempts[1] != 2 {
		t.Errorf("attempts %v, want [1 2]", attempts)
	}
	naks := e.mon.all("-NAK")
	if len(naks) != 1 || naks[0].delay != 20*time.Millisecond || naks[0].delivered != 1 {
		t.Errorf("Naks %+v; want one, delay 20ms, on delivery 1", naks)
	}
	if m := p.top.Metrics().Component("js"); m.FailedTimeout != 1 {
		t.Errorf("%d timeouts, want 1", m.FailedTimeout)
	}
}

type boltFunc func(t *topology.Tuple, c *topology.BoltCollector)

func (f boltFunc) Execute(t *topology.Tuple, c *topology.BoltCollector) { f(t, c) }

// TestDeadLetterThenTerm fails one message at every attempt: Naks with
// growing delays, then at the last attempt the dead-letter hook (before
// the Term), then Term, and the server never delivers it again.
func TestDeadLetterThenTerm(t *testing.T) {
	const n = 5
	e, _ := newStream(t, n, 2*time.Second, 0)
	l := newLedger()
	cfg := testTopology()
	cfg.Retry.MaxAttempts = 3
	var p *pipeline
	var mu sync.Mutex
	var dead []DeadLetter
	var termedBefore []uint64
	scfg := Config{JetStream: e.js, Stream: "S", Consumer: "c", DeadLetter: func(d DeadLetter) {
		mu.Lock()
		dead = append(dead, d)
		termedBefore = append(termedBefore, p.stats().DeadLettered)
		mu.Unlock()
	}}
	p = start(t, cfg, scfg, 1, func(b *topology.Builder) {
		b.Bolt("rec", recorder(l, func(seq uint64, _ int) bool { return seq == 3 })).Input("js", topology.Shuffle())
	})
	e.waitSettled("S", "c", n)
	p.stop(t)

	if a := l.get(3); len(a) != 3 || !consecutive(a) {
		t.Errorf("message 3: attempts %v, want [1 2 3]", a)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dead))
	}
	d := dead[0]
	var f *topology.Failure
	if d.Position != (Position{"S", 3}) || d.Delivered != 3 || !errors.As(d.Err, &f) || f.Attempts != 3 ||
		f.Reason != ackcore.ReasonExplicit || !errors.Is(d.Err, errInjected) || string(d.Msg.Data()) != "message 3" {
		t.Errorf("dead letter %+v (%v)", d, d.Err)
	}
	if termedBefore[0] != 0 {
		t.Errorf("the hook ran after %d Terms; want before", termedBefore[0])
	}
	var got []string
	for _, r := range e.mon.all() {
		if r.seq == 3 {
			got = append(got, r.kind)
			if r.kind == "-NAK" && r.delay != 20*time.Millisecond<<(r.delivered-1) {
				t.Errorf("Nak on delivery %d: delay %v", r.delivered, r.delay)
			}
			if r.kind == "+TERM" && r.delivered != 3 {
				t.Errorf("Term on delivery %d, want 3", r.delivered)
			}
		}
	}
	if strings.Join(got, " ") != "-NAK -NAK +TERM" {
		t.Errorf("replies to message 3: %v, want -NAK -NAK +TERM", got)
	}
	if st := p.stats(); st.DeadLettered != 1 || st.Naked != 2 || st.Acked != n-1 || st.PastLimit != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestDeliveryCountChecked prepares messages with earlier deliveries (a
// plain client Naks them, as a crashed pipeline's expired AckWaits would
// count them): one past the last attempt is dead-lettered and Termed
// without being processed; one at the last attempt is processed as that
// attempt; a fresh one as attempt 1.
func TestDeliveryCountChecked(t *testing.T) {
	const maxAttempts = 3
	e, cons := newStream(t, 2, 5*time.Second, 0)
	// Message 1 is to come next as delivery 4 (past the last attempt),
	// message 2 as delivery 3 (the last). Nak each until it has been
	// delivered one less; the last of those Naks has a delay, so that it
	// does not come back while the other is still being prepared.
	target := map[uint64]int{1: 3, 2: 2}
	for done := 0; done < len(target); {
		b, err := cons.Fetch(1, natsjs.FetchMaxWait(testTimeout))
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			seq, d := md.Sequence.Stream, int(md.NumDelivered)
			switch {
			case d < target[seq]:
				err = m.Nak()
			case d == target[seq]:
				err = m.NakWithDelay(time.Second)
				done++
			default:
				t.Fatalf("message %d delivered %d times, target %d", seq, d, target[seq])
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	e.publish("S", 3, 3, nil) // message 3: fresh
	l := newLedger()
	cfg := testTopology()
	cfg.Retry.MaxAttempts = maxAttempts
	var mu sync.Mutex
	var dead []DeadLetter
	scfg := Config{JetStream: e.js, Stream: "S", Consumer: "c", DeadLetter: func(d DeadLetter) {
		mu.Lock()
		dead = append(dead, d)
		mu.Unlock()
	}}
	p := start(t, cfg, scfg, 1, func(b *topology.Builder) {
		b.Bolt("rec", recorder(l, nil)).Input("js", topology.Shuffle())
	})
	e.waitSettled("S", "c", 3)
	p.stop(t)
	if a := l.get(1); len(a) != 0 {
		t.Errorf("message 1 (delivered past the limit) processed: attempts %v", a)
	}
	if a := l.get(2); len(a) != 1 || a[0] != maxAttempts {
		t.Errorf("message 2: attempts %v, want [%d]", a, maxAttempts)
	}
	if a := l.get(3); len(a) != 1 || a[0] != 1 {
		t.Errorf("message 3: attempts %v, want [1]", a)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dead) != 1 || dead[0].Position.Seq != 1 || dead[0].Delivered != 4 || !errors.Is(dead[0].Err, ErrDeliveryLimit) {
		t.Errorf("dead letters %+v; want message 1 at delivery 4, ErrDeliveryLimit", dead)
	}
	if terms := e.mon.all("+TERM"); len(terms) != 1 || terms[0].seq != 1 || terms[0].delivered != 4 {
		t.Errorf("Terms %+v; want message 1 at delivery 4", terms)
	}
	if st := p.stats(); st.PastLimit != 1 || st.DeadLettered != 1 || st.Emitted != 2 || st.Acked != 2 {
		t.Errorf("stats %+v", st)
	}
}

// TestNakOnShutdown stops a topology whose bolt holds every message: the
// spout Naks each (bare: handed back at once), so a new reader gets them
// right away as their second delivery, long before the 30 s AckWait.
func TestNakOnShutdown(t *testing.T) {
	const ackWait = 30 * time.Second
	e, cons := newStream(t, 20, ackWait, 0)
	cfg := testTopology()
	cfg.MaxSpoutPending = 8
	h := &holder{}
	p := start(t, cfg, Config{JetStream: e.js, Stream: "S", Consumer: "c"}, 1, withHolder(h, make(chan string)))
	waitFor(t, "8 messages held", func() bool { held, _, _ := h.state(); return held == 8 }, nil)
	stopped := time.Now()
	p.stopNow(t)
	st := p.stats()
	if st.NakedStopped != 8 || st.Held != 0 || st.Acked != 0 || st.Fetched != 8 {
		t.Errorf("stats %+v; want 8 fetched, all Naked at shutdown", st)
	}
	waitFor(t, "the monitor to see 8 Naks", func() bool { return len(e.mon.all("-NAK")) == 8 }, nil)
	for _, r := range e.mon.all("-NAK") {
		if r.delay != 0 || r.delivered != 1 {
			t.Errorf("shutdown Nak %+v; want bare, delivery 1", r)
		}
	}
	b, err := cons.Fetch(20, natsjs.FetchMaxWait(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	again := 0
	for m := range b.Messages() {
		md, _ := m.Metadata()
		if md.NumDelivered == 2 {
			again++
		}
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if again != 8 || time.Since(stopped) >= ackWait {
		t.Errorf("after %v, %d messages back as delivery 2; want 8 before AckWait %v", time.Since(stopped), again, ackWait)
	}
}

// TestMaxAckPendingBound holds every message: what one spout holds stays
// within its topology's pending bound, and what all spouts of a consumer
// hold within the consumer's MaxAckPending.
func TestMaxAckPendingBound(t *testing.T) {
	for _, c := range []struct {
		name                          string
		tasks, spoutPending, ackPend  int
		wantMost, wantCapacityPerTask int
	}{
		{"spout-pending", 1, 4, 100, 4, 4},
		{"max-ack-pending", 1, 64, 4, 4, 4},
		{"shared-consumer", 2, 4, 6, 6, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n = 30
			e := newEnv(t)
			e.stream("S", n, nil)
			e.consumer("S", ConsumerConfig("c", 5*time.Second, c.ackPend))
			cfg := testTopology()
			cfg.MaxSpoutPending = c.spoutPending
			h := &holder{}
			cmds := make(chan string)
			p := start(t, cfg, Config{JetStream: e.js, Stream: "S", Consumer: "c", FetchWait: 100 * time.Millisecond}, c.tasks, withHolder(h, cmds))
			// Wait until the bound is reached and every task has asked for
			// more since (it has a request open, or it is full).
			waitFor(t, "the bound to be reached", func() bool {
				held, _, _ := h.state()
				return held == c.wantMost
			}, nil)
			info := e.info("S", "c")
			if info.NumAckPending != c.wantMost {
				t.Errorf("consumer: %s; want %d ack pending", describe(info), c.wantMost)
			}
			if c.tasks > 1 {
				waitFor(t, "a spout's request held back by MaxAckPending", func() bool {
					info = e.info("S", "c")
					return info.NumWaiting >= 1
				}, func() string { return describe(info) })
			}
			for done := false; !done; {
				cmds <- "ack"
				_, seen, _ := h.state()
				done = seen == n && p.stats().Acked == n
			}
			e.waitSettled("S", "c", n)
			p.stop(t)
			_, _, most := h.state()
			st := p.stats()
			if most != c.wantMost || st.Capacity != int64(c.tasks*c.wantCapacityPerTask) {
				t.Errorf("held at most %d (want %d), capacity %d (want %d per task)", most, c.wantMost, st.Capacity, c.wantCapacityPerTask)
			}
			for _, sp := range p.spouts {
				if s := sp.Stats(); s.HeldHigh > int64(c.wantCapacityPerTask) {
					t.Errorf("a spout held %d, capacity %d", s.HeldHigh, c.wantCapacityPerTask)
				}
			}
		})
	}
}

// TestOpenErrors: a consumer or configuration the spout cannot work with
// fails topology.Start with an error naming the value.
func TestOpenErrors(t *testing.T) {
	e := newEnv(t)
	e.stream("S", 1, nil)
	e.consumer("S", ConsumerConfig("ok", 5*time.Second, 0))
	none := ConsumerConfig("none", 5*time.Second, 0)
	none.AckPolicy = natsjs.AckNonePolicy
	e.consumer("S", none)
	limited := ConsumerConfig("limited", 5*time.Second, 0)
	limited.MaxDeliver = 5
	e.consumer("S", limited)
	quick := ConsumerConfig("quick", 50*time.Millisecond, 0)
	e.consumer("S", quick)
	push := ConsumerConfig("push", 5*time.Second, 0)
	push.DeliverSubject = "push.here"
	e.consumer("S", push)
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Stream: "S", Consumer: "ok"}, "Config.JetStream is nil"},
		{Config{JetStream: e.js, Consumer: "ok"}, `Config.Stream "" is empty`},
		{Config{JetStream: e.js, Stream: "S", Consumer: "ok", FetchWait: time.Millisecond}, "FetchWait 1ms"},
		{Config{JetStream: e.js, Stream: "S", Consumer: "missing"}, `consumer "missing" of stream "S"`},
		{Config{JetStream: e.js, Stream: "S", Consumer: "none"}, `consumer "none" has AckPolicy AckNone`},
		{Config{JetStream: e.js, Stream: "S", Consumer: "limited"}, "MaxDeliver 5 must exceed Retry.MaxAttempts 5"},
		{Config{JetStream: e.js, Stream: "S", Consumer: "quick"}, "AckWait 50ms is below 100ms"},
		{Config{JetStream: e.js, Stream: "S", Consumer: "push"}, "not a pull consumer"},
	} {
		_, err := build(t, testTopology(), c.cfg, 1, func(*topology.Builder) {})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Start with %+v: %v; want an error with %q", c.cfg, err, c.want)
		}
	}
}

// TestStuckExecutorLetsGo blocks the spout's executor in Decode: the
// message is kept alive only as long as a tree could live (ResetCap +
// AckWait), then let go, and the server redelivers it rather than leave
// it to a hung pipeline forever.
func TestStuckExecutorLetsGo(t *testing.T) {
	const ackWait = 300 * time.Millisecond
	e, _ := newStream(t, 1, ackWait, 0)
	cfg := testTopology()
	cfg.MessageTimeout, cfg.ResetCap = 200*time.Millisecond, 200*time.Millisecond
	release := make(chan struct{})
	var once, unblock sync.Once
	free := func() { unblock.Do(func() { close(release) }) }
	l := newLedger()
	scfg := Config{JetStream: e.js, Stream: "S", Consumer: "c", FetchWait: 100 * time.Millisecond,
		Decode: func(m natsjs.Msg, pos Position) ([]any, error) {
			once.Do(func() { <-release }) // the first call hangs
			return []any{pos, m.Data()}, nil
		}}
	p := start(t, cfg, scfg, 1, func(b *topology.Builder) {
		b.Bolt("rec", recorder(l, nil)).Input("js", topology.Shuffle())
	})
	t.Cleanup(free) // runs before the topology's Stop, which waits for Decode
	waitFor(t, "the message let go and fetched again", func() bool {
		st := p.stats()
		return st.LetGo >= 1 && st.Fetched >= 2
	}, func() string { return fmtStats(p.stats()) })
	free()
	e.waitSettled("S", "c", 1)
	p.stop(t)
	// Every copy the server delivered while the executor hung was held,
	// kept alive for a while, let go and redelivered; once it is free,
	// each is processed and acked.
	a := l.get(1)
	if !consecutive(a) {
		t.Errorf("attempts %v, want 1, 2, ...: the hung copy, then the redelivered ones", a)
	}
	st := p.stats()
	if len(a) < 2 || st.Held != 0 || st.Acked != uint64(len(a)) || st.LetGo < 1 {
		t.Errorf("attempts %v, stats %s", a, fmtStats(st))
	}
	if n := e.mon.count("+WPI", 1); n == 0 {
		t.Errorf("no InProgress before the message was let go")
	}
}

func fmtStats(s Stats) string {
	return strings.TrimPrefix(strings.ReplaceAll(fmt.Sprintf("%+v", s), " ", ", "), "{")
}
