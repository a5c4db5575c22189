package netio

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/splitmix"
)

// TestRoundTrip: trees sent over one connection complete, failed ones
// fail, each exactly once, with the client's local task.
func TestRoundTrip(t *testing.T) {
	s, c := dialNew(t, acker.Spec{Producers: 1, Tasks: 2}, func(cfg *ClientConfig) { cfg.TaskBase = 10 })
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 5000
	sendTrees(t, c.Sender(0), rng, n, 4, func(i int, msgs []ackcore.Msg) []ackcore.Msg {
		msgs[0].Task = uint32(i % 2)
		if i%10 == 0 {
			msgs[2] = ackcore.Msg{Root: uint64(i), Kind: ackcore.Fail}
		}
		return msgs
	})
	got0 := collect(t, c.Inbox(0), n/2, 10*time.Second)
	got1 := collect(t, c.Inbox(1), n/2, 10*time.Second)
	for task, got := range []map[uint64][]ackcore.Outcome{got0, got1} {
		for root, os := range got {
			if len(os) != 1 {
				t.Fatalf("root %d: %d outcomes", root, len(os))
			}
			o := os[0]
			if int(root%2) != task || o.Task != uint32(task) {
				t.Fatalf("root %d in inbox %d with task %d", root, task, o.Task)
			}
			want := ackcore.Completed
			if root%10 == 0 {
				want = ackcore.Failed
			}
			if o.Kind != want {
				t.Fatalf("root %d: %v %v, want %v", root, o.Kind, o.Reason, want)
			}
		}
	}
	st := c.Stop()
	if st.Completed != n-n/10 || st.FailedExplicit != n/10 {
		t.Fatalf("client stats %+v", st)
	}
	if ss := s.Stats(); ss.Msgs != n*5 {
		t.Fatalf("server took %d messages, want %d", ss.Msgs, n*5)
	}
}

// TestKillOneOfTwo: a producer keeps a window of open trees going to two
// servers; one is killed mid-run. Every root ends with exactly one
// outcome: the killed server's pending roots Failed{acker lost}, within
// a fraction of the acker timeout, and every other root Completed, new
// roots going to the survivor.
func TestKillOneOfTwo(t *testing.T) {
	const timeout = 20 * time.Second
	mod := func(c *ServerConfig) { c.Shard.Timeout = timeout }
	s1, s2 := startServer(t, mod), startServer(t, mod)
	c := mustDial(t, clientCfg(s1.addr, s2.addr), acker.Spec{Producers: 1, Tasks: 1})
	n := 40000
	if testing.Short() {
		n = 8000
	}
	const window = 500
	rng := rand.New(rand.NewPCG(3, 4))
	p := c.Sender(0)
	type open struct{ rest []ackcore.Msg }
	var q []open
	got := map[uint64][]ackcore.Outcome{}
	var buf []ackcore.Outcome
	var killedAt time.Time
	var lastLost time.Duration
	detected := 0 // the first root sent after the client saw s1 go
	ib := c.Inbox(0)
	poll := func() {
		buf = ib.Poll(buf[:0])
		for _, o := range buf {
			got[o.Root] = append(got[o.Root], o)
			if o.Reason == ackcore.ReasonLost && !killedAt.IsZero() {
				lastLost = max(lastLost, time.Since(killedAt))
			}
		}
	}
	for i := 1; i <= n; i++ {
		msgs := tree(rng, uint64(i)*splitmix.Golden|1, 0, 6)
		if err := p.SendBatch(msgs[:4]); err != nil {
			t.Fatal(err)
		}
		q = append(q, open{msgs[4:]})
		if len(q) > window {
			if err := p.SendBatch(q[0].rest); err != nil {
				t.Fatal(err)
			}
			q = q[1:]
		}
		if i%64 == 0 {
			if err := p.Flush(); err != nil {
				t.Fatal(err)
			}
			poll()
		}
		if i == n/2 {
			s1.Close()
			killedAt = time.Now()
		}
		if detected == 0 && !killedAt.IsZero() && i%64 == 0 {
			if i >= n-n/8 {
				// A busy machine: the rest is sent after the loss is
				// seen, so that some roots surely are.
				waitFor(t, 5*time.Second, "the client to see the killed server go", func() bool {
					poll()
					_, cs := c.Stats()
					return cs.HostsUp == 1
				})
			}
			if _, cs := c.Stats(); cs.HostsUp == 1 {
				detected = i
			}
		}
	}
	for _, o := range q {
		if err := p.SendBatch(o.rest); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(timeout / 2)
	for len(got) < n && time.Now().Before(deadline) {
		poll()
		time.Sleep(time.Millisecond)
	}
	if detected == 0 {
		t.Fatal("the client never saw the killed server go")
	}
	var lost, done int
	both := []*host{c.hosts[0], c.hosts[1]}
	for i := 1; i <= n; i++ {
		root := uint64(i)*splitmix.Golden | 1
		os := got[root]
		if len(os) != 1 {
			t.Fatalf("root %d: %d outcomes %v", i, len(os), os)
		}
		switch o := os[0]; {
		case o.Kind == ackcore.Completed:
			done++
		case o.Kind == ackcore.Failed && o.Reason == ackcore.ReasonLost:
			lost++
			if pick(both, c.cfg.HashKey, root) != c.hosts[0] {
				t.Fatalf("root %d failed as lost but belongs to the survivor", i)
			}
			if i > detected {
				t.Fatalf("root %d sent after the loss was seen (root %d) failed as lost", i, detected)
			}
		default:
			t.Fatalf("root %d: %v %v", i, o.Kind, o.Reason)
		}
	}
	if lost == 0 {
		t.Fatal("no root failed as lost")
	}
	if lastLost > timeout/4 {
		t.Fatalf("last lost root reported %v after the kill; fail-fast means well before the %v timeout", lastLost, timeout)
	}
	st := c.Stop()
	if st.Pending != 0 {
		t.Fatalf("%d roots in flight after Stop", st.Pending)
	}
	t.Logf("%d roots: %d completed, %d lost (last %v after the kill, loss seen at root %d of %d sent by then); survivor took %d msgs",
		n, done, lost, lastLost, detected, n/2, s2.Stats().Msgs)
}

// TestShutdownFailsPending: SIGTERM's path. Roots pending on a server
// that shuts down are reported Failed{stopped} by it, over the
// connection, before it closes; the client then has nothing left.
func TestShutdownFailsPending(t *testing.T) {
	s, c := dialNew(t, acker.Spec{Producers: 1, Tasks: 1}, nil)
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 3000
	sendTrees(t, c.Sender(0), rng, n, 3, func(_ int, msgs []ackcore.Msg) []ackcore.Msg {
		return msgs[:3] // the last ACK withheld
	})
	waitFor(t, 5*time.Second, "the server to read every message", func() bool { return s.Stats().Msgs == 3*n })
	shutdown(t, s)
	got := collect(t, c.Inbox(0), n, 5*time.Second)
	for root, os := range got {
		if len(os) != 1 || os[0].Kind != ackcore.Failed || os[0].Reason != ackcore.ReasonStopped {
			t.Fatalf("root %d: %v", root, os)
		}
	}
	if !contains(s.log.String(), "") {
		t.Fatal("no log")
	}
	c.Stop()
}

// TestRegisterAfterLoss: INITs the writer took from the queue before
// their host was lost, and registers after lose took the pending table,
// are failed as lost by the writer, once each, with their tasks; the
// same INITs registered for the live generation are resolved by the
// server's outcomes as usual.
func TestRegisterAfterLoss(t *testing.T) {
	_, c := dialNew(t, acker.Spec{Producers: 1, Tasks: 3}, nil)
	defer c.Stop()
	h := c.hosts[0]
	h.pendMu.Lock()
	gen := h.genP
	h.pendMu.Unlock()
	if gen == 0 {
		t.Fatal("a connected host has no table generation")
	}
	inits := []initRec{{root: 7, task: 1, ms: 1}, {root: 8, task: 2, ms: 1}}
	if !c.tryAcquire(len(inits)) {
		t.Fatal("no slots")
	}
	// A generation the table does not belong to: what the writer sees
	// when lose ran between its taking the queue and its registering.
	if h.register(gen+1, inits) {
		t.Fatal("registered under a stale generation")
	}
	got := collect(t, c.Inbox(0), 0, time.Second)
	got1 := collect(t, c.Inbox(1), 1, time.Second)
	got2 := collect(t, c.Inbox(2), 1, time.Second)
	if len(got) != 0 || len(got1[7]) != 1 || len(got2[8]) != 1 {
		t.Fatalf("outcomes by inbox: %v %v %v", got, got1, got2)
	}
	for _, o := range []ackcore.Outcome{got1[7][0], got2[8][0]} {
		if o.Kind != ackcore.Failed || o.Reason != ackcore.ReasonLost {
			t.Fatalf("root %d: %v %v, want failed, acker lost", o.Root, o.Kind, o.Reason)
		}
	}
	h.pendMu.Lock()
	n := h.pend.n
	h.pendMu.Unlock()
	if n != 0 {
		t.Fatalf("%d roots registered", n)
	}
	if st, cs := c.Stats(); st.Pending != 0 || cs.Lost != 2 {
		t.Fatalf("pending %d, lost %d; want 0, 2", st.Pending, cs.Lost)
	}
}

// TestLossWhileIdle: the server goes while the client has nothing to
// write (its writer waiting for work or its next heartbeat, a minute
// away): the reader's end alone must take the host down, and the root
// pending on it fails as lost at once, not at the next heartbeat.
func TestLossWhileIdle(t *testing.T) {
	s := startServer(t, func(c *ServerConfig) { c.IdleTimeout = 3 * time.Minute })
	c := mustDial(t, clientCfg(s.addr), acker.Spec{Producers: 1, Tasks: 1})
	defer c.Stop()
	p := c.send[0]
	if err := p.SendBatch([]ackcore.Msg{{Root: 42, Kind: ackcore.Init, Val: 3}, {Root: 42, Kind: ackcore.Ack, Val: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the server to read both messages", func() bool { return s.Stats().Msgs == 2 })
	waitFor(t, 5*time.Second, "the writer to go idle", func() bool {
		h := c.hosts[0]
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.writerIdle
	})
	start := time.Now()
	s.Close()
	got := collect(t, c.Inbox(0), 1, 20*time.Second)
	o := got[42]
	if len(o) != 1 || o[0].Kind != ackcore.Failed || o[0].Reason != ackcore.ReasonLost {
		t.Fatalf("root 42: %v, want one Failed{acker lost}", o)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the loss took %v to report; the heartbeat is a minute away, the reader saw it at once", d)
	}
}

// TestStopUnread: Stop returns while nobody reads a full inbox; what
// the inbox holds, and the roots Stop failed, are read after it, each
// once, and Wait then says the inbox is closed.
func TestStopUnread(t *testing.T) {
	s, c := dialNew(t, acker.Spec{Producers: 1, Tasks: 1}, func(cfg *ClientConfig) { cfg.MaxPending = 64 })
	rng := rand.New(rand.NewPCG(7, 8))
	p := c.send[0]
	for i := 1; i <= 64; i++ { // complete: the inbox fills to its bound
		if err := p.SendBatch(tree(rng, uint64(i), 0, 3)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	ib := c.inbox[0]
	waitFor(t, 5*time.Second, "64 outcomes in the inbox", func() bool { return ib.q.Len() == 64 })
	for i := 65; i <= 128; i++ { // pending: the last ACK withheld
		if err := p.SendBatch(tree(rng, uint64(i), 0, 3)[:3]); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the server to read every message", func() bool { return s.Stats().Msgs == 64*4+64*3 })
	st := c.Stop()
	if st.Completed != 64 || st.FailedStopped != 64 || st.Pending != 0 {
		t.Fatalf("after Stop: %+v", st)
	}
	got := collect(t, ib, 128, 5*time.Second)
	for i := uint64(1); i <= 128; i++ {
		o := got[i]
		want := ackcore.Completed
		if i > 64 {
			want = ackcore.Failed
		}
		if len(o) != 1 || o[0].Kind != want || want == ackcore.Failed && o[0].Reason != ackcore.ReasonStopped {
			t.Fatalf("root %d: %v", i, o)
		}
	}
	if buf, ok := ib.Wait(nil); ok || len(buf) != 0 {
		t.Fatalf("Wait after the last outcome: %v %v, want nothing and false", buf, ok)
	}
}

// TestDrainOverTheWire: a FAIL frame's val reaches the shard: trees failed
// with the val of the ACK each FAIL replaces report Failed once, and their
// later ACKs empty the drains the FAILs left, so that the server's shard
// holds nothing of them (OrphansDrained counts every one, Orphans none);
// the same FAILs without a val leave those ACKs orphans instead.
func TestDrainOverTheWire(t *testing.T) {
	for _, withVal := range []bool{true, false} {
		s, c := dialNew(t, acker.Spec{Producers: 1, Tasks: 1}, nil)
		rng := rand.New(rand.NewPCG(3, 4))
		const n = 2000
		sendTrees(t, c.Sender(0), rng, n, 4, func(i int, msgs []ackcore.Msg) []ackcore.Msg {
			if i%10 == 0 {
				val := msgs[2].Val // the failed tuple's ack val; ACKs 3 and 4 still come
				if !withVal {
					val = 0
				}
				msgs[2] = ackcore.Msg{Root: uint64(i), Kind: ackcore.Fail, Val: val}
			}
			return msgs
		})
		got := collect(t, c.Inbox(0), n, 10*time.Second)
		failed := 0
		for _, os := range got {
			if len(os) == 1 && os[0].Kind == ackcore.Failed {
				failed++
			}
		}
		c.Stop()
		s.Close()
		<-s.done
		st := s.Stats().Acker
		if failed != n/10 || st.FailedExplicit != n/10 {
			t.Fatalf("val %v: %d roots failed, acker %+v", withVal, failed, st)
		}
		if withVal && (st.OrphansDrained != n/10 || st.Orphans != 0 || st.Pending != 0) {
			t.Fatalf("FAILs with their val: acker %+v, want %d drained and nothing left", st, n/10)
		}
		if !withVal && st.OrphansDrained != 0 {
			t.Fatalf("FAILs without a val: acker %+v, want no drains", st)
		}
	}
}
