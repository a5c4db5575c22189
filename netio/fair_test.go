package netio

import (
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/race"
	"github.com/xorack/xorack/internal/testkit"
)

// The hostile-client suite, part two: each attack beside a well-behaved
// client, whose trees must all complete. Everything runs in
// process over real TCP on 127.0.0.1, bounded in count, and stops by
// itself.

// idleConns are connections that never say a word.
type idleConns struct {
	mu sync.Mutex
	cs []net.Conn
}

// dial opens one more to addr, if it can.
func (ic *idleConns) dial(addr string) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return
	}
	ic.mu.Lock()
	ic.cs = append(ic.cs, c)
	ic.mu.Unlock()
}

func (ic *idleConns) closeAll() {
	ic.mu.Lock()
	for _, c := range ic.cs {
		c.Close()
	}
	ic.cs = nil
	ic.mu.Unlock()
}

// closeFrame reads until the server closes and returns the close frame's
// code and reason; ok is false when none came.
func (rc *rawConn) closeFrame(t testing.TB) (code uint16, reason string, ok bool) {
	t.Helper()
	for {
		f, err := rc.fr.Next()
		if err != nil {
			if ne, isNet := err.(net.Error); isNet && ne.Timeout() {
				t.Fatal("the server did not close the connection")
			}
			if !ok {
				t.Logf("read ended: %v", err)
			}
			return code, reason, ok
		}
		if f.Type == typeClose {
			code, reason, _ = decodeClose(f.Body)
			ok = true
		}
	}
}

// wantClose reads rc's close frame and checks its code and reason.
func wantClose(t testing.TB, rc *rawConn, code uint16, reason string) {
	t.Helper()
	c, r, ok := rc.closeFrame(t)
	if !ok {
		t.Fatalf("closed without a close frame; want code %d %q", code, reason)
	}
	if c != code || !strings.Contains(r, reason) {
		t.Fatalf("close code %d %q, want %d %q", c, r, code, reason)
	}
}

// trees sends n complete trees for task through a client of its own (id
// and task base task) with at most window in flight, and returns how
// many completed and the other outcomes by reason.
func trees(t testing.TB, addr string, task uint32, n, window int) (completed int, failed map[ackcore.Reason]int) {
	t.Helper()
	cfg := clientCfg(addr)
	cfg.TaskBase = task
	cfg.ID = 0x5eed0000 + uint64(task)
	c := mustDial(t, cfg, acker.Spec{Producers: 1, Tasks: 1})
	defer c.Stop()
	return treesOn(t, c, 0, task, n, window)
}

// treesOn is trees on client c, with roots numbered from first.
func treesOn(t testing.TB, c *Client, first uint64, task uint32, n, window int) (completed int, failed map[ackcore.Reason]int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(task), first))
	p, ib := c.Sender(0), c.Inbox(0)
	failed = map[ackcore.Reason]int{}
	var buf []ackcore.Outcome
	deadline := time.After(20 * time.Second)
	for sent, got := 0, 0; got < n; {
		for sent < n && sent-got < window {
			sent++
			if err := p.SendBatch(tree(rng, (first+uint64(sent))<<16|uint64(task), 0, 3)); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
		var ok bool
		buf, ok = ib.WaitUntil(buf[:0], deadline)
		if !ok || len(buf) == 0 {
			t.Fatalf("%d of %d outcomes before the deadline", got, n)
		}
		got += len(buf)
		tally(buf, &completed, failed)
	}
	return completed, failed
}

// wantAllComplete runs trees and fails unless every one completed.
func wantAllComplete(t testing.TB, addr string, task uint32, n int) {
	t.Helper()
	if done, failed := trees(t, addr, task, n, 64); done != n {
		t.Fatalf("the good client: %d of %d trees completed, failed %v", done, n, failed)
	}
}

// TestRootTimeoutCap: an INIT or RESET asking for longer than
// MaxRootTimeout closes its connection with a protocol error naming the
// value and the cap, and none of its frame reaches the acker.
func TestRootTimeoutCap(t *testing.T) {
	s := startServer(t, nil) // Timeout 10s: cap 40s
	for _, kind := range []ackcore.Kind{ackcore.Reset, ackcore.Init} {
		rc := rawDial(t, s.addr)
		rc.login(t, 1, taskRange{1, 1})
		m := ackcore.Msg{Root: 5, Kind: kind, TimeoutMs: 86_400_000}
		if kind == ackcore.Init {
			m.Task = 1
		}
		_, _ = rc.Write(appendMsgs(nil, []ackcore.Msg{{Root: 4, Kind: ackcore.Ack, Val: 1}, m}))
		wantClose(t, rc, closeProtocol, "asks for a timeout of 86400000 ms, past the server's cap of 40000 ms")
		rc.Close()
	}
	if st := s.Stats(); st.Msgs != 0 {
		t.Fatalf("%d messages reached the acker", st.Msgs)
	}
	if _, err := NewServer(ServerConfig{Secret: testSecret, Shard: ackcore.Config{MaxPending: 16, Timeout: time.Minute},
		MaxRootTimeout: time.Second}); err == nil || !strings.Contains(err.Error(), "MaxRootTimeout 1s out of range") {
		t.Fatalf("a cap below the default timeout: %v", err)
	}
}

// TestResetFlood: a client with one task sends 1,100 RESETs for roots
// never INITed, against MaxPending 1,024, and disconnects. Its RESET
// share (half the table: it is alone) takes 512 of them, the rest are
// dropped and counted; a second client's trees then all complete. With
// a 24-hour timeout, see TestRootTimeoutCap.
func TestResetFlood(t *testing.T) {
	s := startServer(t, func(c *ServerConfig) { c.Shard.MaxPending = 1024 })
	rc := rawDial(t, s.addr)
	rc.login(t, 1, taskRange{1, 1})
	var b []ackcore.Msg
	for i := range 1100 {
		b = append(b, ackcore.Msg{Root: uint64(i + 1), Kind: ackcore.Reset, TimeoutMs: 40_000})
	}
	if _, err := rc.Write(appendMsgs(nil, b)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the RESETs to be read", func() bool { st := s.Stats(); return st.Msgs+st.ResetsDropped >= 1100 })
	rc.Close()
	st := s.Stats()
	if st.ResetsDropped != 1100-512 {
		t.Fatalf("%d RESETs dropped, want %d", st.ResetsDropped, 1100-512)
	}
	waitFor(t, 5*time.Second, "the acker to count them", func() bool { return s.Stats().Acker.Resets >= 512 })
	if p := s.Stats().Acker.Pending; p > 512 {
		t.Fatalf("%d entries pending, want at most 512", p)
	}
	wantAllComplete(t, s.addr, 2, 400)

	// Again, reconnecting: a new connection's RESET share is fresh, the
	// server's is not, and it is spent.
	rc = rawDial(t, s.addr)
	rc.login(t, 1, taskRange{1, 1})
	for i := range b {
		b[i].Root += 1 << 32
	}
	if _, err := rc.Write(appendMsgs(nil, b)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the RESETs to be read", func() bool { return s.Stats().ResetsDropped >= 1100-512+1100 })
	rc.Close()
	wantAllComplete(t, s.addr, 2, 400)
	// The acker's counters are a tick old: once they show the trees
	// sent after the RESETs, they show the RESETs.
	waitFor(t, 5*time.Second, "fresh acker counters", func() bool { return s.Stats().Acker.Inits >= 800 })
	if st := s.Stats(); st.Acker.Resets != 512 {
		t.Fatalf("the acker took %d RESETs, want 512 within MaxRootTimeout", st.Acker.Resets)
	}
}

// TestAckFlood: a connection owning no task sends 1.1 million ACKs for
// random roots; a second client's trees then all complete. An ACK for an
// unknown root makes an entry in the acker; that entry gives way to an
// INIT at the bound, the acker's rule, which netio does not
// duplicate.
func TestAckFlood(t *testing.T) {
	testkit.SkipUnderInvariants(t, "tables of tens of thousands of roots or more: the invariant checks (O(table) an Apply) take minutes; the differential tests run them")
	s := startServer(t, func(c *ServerConfig) { c.Shard.MaxPending = 1 << 14 })
	rc := rawDial(t, s.addr)
	defer rc.Close()
	rc.login(t, 1)
	n := 1_100_000
	if testing.Short() {
		n = 200_000
	}
	rng := rand.New(rand.NewPCG(1, 1))
	msgs := make([]ackcore.Msg, maxMsgsPerFrame(DefaultMaxFrame))
	// The deadlines are per frame and per stretch without progress, not
	// for the whole flood: the server reads it at the pace of the CPU it
	// gets (under the race detector on one CPU of a machine at load 5,
	// the writes took 5 s of the connection's one 10 s deadline, which a
	// busier machine passed), and a server that stops reading still
	// fails the test.
	for sent := 0; sent < n; sent += len(msgs) {
		for i := range msgs {
			msgs[i] = ackcore.Msg{Root: rng.Uint64() | 1, Kind: ackcore.Ack, Val: 1}
		}
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := rc.Write(appendMsgs(nil, msgs)); err != nil {
			t.Fatalf("after %d of %d ACKs: %v", sent, n, err)
		}
	}
	waitProgress(t, 10*time.Second, "the flood to be read", uint64(n), func() uint64 { return s.Stats().Msgs })
	wantAllComplete(t, s.addr, 2, 400)
}

// TestFairShare (netio rule 10): 20 connections flood INITs at the
// timeout cap (their roots never complete) while a steady client runs
// trees, at the default reserve, over two shards. Whatever slack a
// flooder draws comes out of the one pool, so the connections together
// never hold more than the table: the acker refuses nothing, and the
// steady client's trees all complete, with not one Failed{full}, both
// while the flooders draw their room and once they hold it. Every INIT
// past a flooder's room is answered Failed{full}, counted on its
// connection, and reaches its client. What the flood costs the steady
// client's rate is BenchmarkFairShare's to say (CI gates on it).
func TestFairShare(t *testing.T) {
	testkit.SkipUnderInvariants(t, "tables of tens of thousands of roots or more: the invariant checks (O(table) an Apply) take minutes; the differential tests run them")
	s, table := startFairServer(t)
	// The old rule (the table over the connections and 8 rings' worth of
	// slack each) let them hold 5x the table here.
	if slack := int64(8 * 2 * 1024); (table/(fairFlooders+1)+slack)*fairFlooders < 2*table {
		t.Fatalf("the test does not overcommit the old shares: slack %d", slack)
	}
	n := 200000
	switch {
	case race.Enabled:
		n = 10000
	case testing.Short():
		n = 50000
	}
	// The steady client connects before the flooders: its base share is
	// then its own (a newcomer gets room as the others' roots finish).
	cfg := clientCfg(s.addr)
	cfg.ID = 1
	steady := mustDial(t, cfg, acker.Spec{Producers: 1, Tasks: 1})
	defer steady.Stop()
	var first uint64
	round := func(when string) {
		done, failed := treesOn(t, steady, first, 0, n, 200)
		first += uint64(n)
		if done != n {
			t.Fatalf("%s: the steady client completed %d of %d trees, failed %v", when, done, n, failed)
		}
	}
	f := connectFlood(t, s, table)
	defer f.stop()
	// While the flooders draw their room, and again once they hold it.
	f.start(t)
	round("while the flood draws its room")
	f.waitAtRoom(t, s)
	round("beside the flood at its room")
	conns, st := s.Conns(), s.Stats()
	var held int64
	for _, cs := range conns {
		held += cs.Held
	}
	if held > table {
		t.Errorf("the connections hold %d roots, past the table's %d", held, table)
	}
	if st.Acker.FailedFull != 0 {
		t.Errorf("the acker refused %d INITs: the table filled", st.Acker.FailedFull)
	}
	// Every refusal counted on its connection came back to its client.
	var refused map[uint64]uint64
	deadline := time.Now().Add(10 * time.Second)
	for {
		refused = map[uint64]uint64{}
		for _, cs := range s.Conns() {
			refused[cs.ClientID] = cs.InitsRefused
		}
		lost := 0
		for i := range f.full {
			if uint64(f.full[i].Load()) != refused[uint64(100+i)] {
				lost++
			}
		}
		if lost == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refusals: the server counted %v, the flooders got %v", refused, f.counts())
		}
		time.Sleep(2 * time.Millisecond)
	}
	if h := steady.Hosts()[0]; h.FailedFull != 0 {
		t.Errorf("the steady client had %d Failed{full}", h.FailedFull)
	}
	t.Logf("the connections hold %d of %d (share %d, unallocated %d); flooders refused %d INITs (%v)",
		held, table, s.Share(), st.Unallocated, st.InitsRefused, f.counts())
}

// fairFlooders is how many connections flood in TestFairShare and
// BenchmarkFairShare.
const fairFlooders = 20

// startFairServer starts the server TestFairShare floods: two shards of
// 10,000 roots, the default reserve, room for the flooders and a few
// more. table is its room in roots.
func startFairServer(t testing.TB) (s *testServer, table int64) {
	const perShard = 10000
	s = startServer(t, func(c *ServerConfig) {
		c.Shards = 2
		c.Shard.MaxPending = perShard
		c.MaxConns = fairFlooders + 4
	})
	return s, 2 * perShard
}

// flood is fairFlooders clients of one server, each owning a task. Once
// started, each sends INITs at the timeout cap until refused 2,000 times,
// then holds what it took (its roots never complete), reading its
// outcomes: every refusal, counted in full. Its roots have the top bit
// set, which treesOn's never have: root ids are unique across clients.
type flood struct {
	clients []*Client
	full    []atomic.Int64
	halt    atomic.Bool
	wg      sync.WaitGroup
	capMs   uint32
}

// connectFlood connects the flooders to s, whose room is table roots;
// they send nothing until start.
func connectFlood(t testing.TB, s *testServer, table int64) *flood {
	t.Helper()
	f := &flood{full: make([]atomic.Int64, fairFlooders), capMs: uint32(s.cfg.MaxRootTimeout / time.Millisecond)}
	for i := range fairFlooders {
		cfg := clientCfg(s.addr)
		// Three base shares in flight at most: past their room, and far
		// past it together (old shares held 2.8x the table at this).
		cfg.TaskBase, cfg.ID, cfg.MaxPending = uint32(10+i), uint64(100+i), int(3*table/(fairFlooders+1))
		f.clients = append(f.clients, mustDial(t, cfg, acker.Spec{Producers: 1, Tasks: 1}))
	}
	return f
}

// start sets the flooders going.
func (f *flood) start(t testing.TB) {
	for i, c := range f.clients {
		f.wg.Go(func() {
			p, ib := c.Sender(0), c.Inbox(0)
			var buf []ackcore.Outcome
			for root := uint64(1); !f.halt.Load(); root++ {
				if f.full[i].Load() < 2000 {
					m := ackcore.Msg{Root: 1<<63 | root<<8 | uint64(i), Kind: ackcore.Init, Val: 1, TimeoutMs: f.capMs}
					if ok, err := p.TrySend(m); err != nil {
						t.Error(err)
						return
					} else if ok {
						continue
					}
				}
				_ = p.Flush()
				buf, _ = ib.WaitUntil(buf[:0], time.After(20*time.Millisecond))
				for _, o := range buf {
					if o.Kind != ackcore.Failed || o.Reason != ackcore.ReasonFull {
						t.Errorf("flooder %d: root %#x %v %v", i, o.Root, o.Kind, o.Reason)
					}
					f.full[i].Add(1)
				}
			}
		})
	}
}

// waitAtRoom waits for full pressure: every flooder refused 2,000 times,
// or holding its client's MaxPending (it drew that much of the reserve
// first).
func (f *flood) waitAtRoom(t testing.TB, s *testServer) {
	t.Helper()
	waitFor(t, 30*time.Second, "every flooder at its room", func() bool {
		held := map[uint64]int64{}
		for _, cs := range s.Conns() {
			held[cs.ClientID] = cs.Held
		}
		for i, n := range f.counts() {
			if n < 2000 && held[uint64(100+i)] < int64(f.clients[i].cfg.MaxPending) {
				return false
			}
		}
		return true
	})
}

// counts is each flooder's refusals so far.
func (f *flood) counts() []int64 {
	c := make([]int64, len(f.full))
	for i := range f.full {
		c[i] = f.full[i].Load()
	}
	return c
}

// stop halts the flooders and stops their clients.
func (f *flood) stop() {
	f.halt.Store(true)
	f.wg.Wait()
	for _, c := range f.clients {
		c.Stop()
	}
}

// TestHandshakeBudget: 2,000 idle handshakes, then one more idle
// connection 26 times a second, while a real client dials again and
// again: it connects every time within its dial timeout, as the oldest
// idle handshakes are dropped for the newer connections. The client
// keeps its id, as a restarted process configured with one does: its
// new connection takes the task over from the one it just stopped,
// which the server may not have seen close yet.
func TestHandshakeBudget(t *testing.T) {
	s := startServer(t, func(c *ServerConfig) { c.MaxConns = 8 })
	idle, tries := 2000, 9
	if testing.Short() {
		idle, tries = 500, 3
	}
	var conns idleConns
	defer conns.closeAll()
	dialIdle := func() { conns.dial(s.addr) }
	for range idle {
		dialIdle()
	}
	waitFor(t, 10*time.Second, "the server to accept them", func() bool { return s.Stats().Accepted >= uint64(idle) })
	quit := make(chan struct{})
	loop := make(chan struct{})
	go func() {
		defer close(loop)
		tick := time.NewTicker(time.Second / 26)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				dialIdle()
			}
		}
	}()
	for i := range tries {
		cfg := clientCfg(s.addr)
		cfg.DialTimeout = 2 * time.Second
		cfg.ID = 0xb0d9e7
		c, err := Dial(cfg, acker.Spec{Producers: 1, Tasks: 1})
		if err != nil {
			t.Fatalf("try %d: %v", i, err)
		}
		p, ib := c.Sender(0), c.Inbox(0)
		_ = p.SendBatch(tree(rand.New(rand.NewPCG(uint64(i), 1)), uint64(i+1), 0, 2))
		_ = p.Flush()
		if got := collect(t, ib, 1, 5*time.Second); got[uint64(i+1)][0].Kind != ackcore.Completed {
			t.Fatalf("try %d: %v", i, got)
		}
		c.Stop()
	}
	close(quit)
	<-loop
	// Every idle connection past the budget was dropped, or on a machine
	// slow enough, timed out first.
	conns.mu.Lock()
	dialed := len(conns.cs)
	conns.mu.Unlock()
	waitFor(t, 10*time.Second, "every idle connection past the budget dropped or timed out", func() bool {
		st := s.Stats()
		return st.HandshakesDropped+st.HandshakeFailures.Timeout >= uint64(dialed-DefaultMaxHandshakes)
	})
	if s.Stats().HandshakesDropped == 0 {
		t.Fatal("no handshake dropped")
	}
}

// TestDialWaitsForTaskOwner: a client whose task is still owned by
// another client's connection (a restarted process with a fresh id,
// before the server saw the old one close) is refused task_owned, and
// Dial tries again within its dial timeout: it connects once the owner
// is gone. An owner that stays past the dial timeout fails Dial with
// the server's reason.
func TestDialWaitsForTaskOwner(t *testing.T) {
	s := startServer(t, nil)
	old := rawDial(t, s.addr)
	defer old.Close()
	old.login(t, 1, taskRange{0, 1})

	dialed := make(chan error, 1)
	go func() {
		cfg := clientCfg(s.addr)
		cfg.ID = 2
		c, err := Dial(cfg, acker.Spec{Producers: 1, Tasks: 1})
		if err == nil {
			c.Stop()
		}
		dialed <- err
	}()
	waitFor(t, 5*time.Second, "a task_owned refusal", func() bool { return s.Stats().HandshakeFailures.TaskOwned >= 2 })
	old.Close()
	select {
	case err := <-dialed:
		if err != nil {
			t.Fatalf("Dial after the owner left: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Dial did not return after the owner left")
	}

	stay := rawDial(t, s.addr)
	defer stay.Close()
	stay.login(t, 3, taskRange{1, 1})
	cfg := clientCfg(s.addr)
	cfg.ID, cfg.TaskBase, cfg.DialTimeout = 4, 1, time.Second
	cfg.Logger = slog.New(slog.DiscardHandler)
	refusals := s.Stats().HandshakeFailures.TaskOwned
	start := time.Now()
	_, err := Dial(cfg, acker.Spec{Producers: 1, Tasks: 1})
	// Its last attempt's reason: task_owned, or on a machine slow enough,
	// a timeout of the attempt that ran past the dial timeout.
	if err == nil || !strings.Contains(err.Error(), "code task_owned") && !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("Dial beside a live owner: %v, want task_owned", err)
	}
	if d := time.Since(start); d < cfg.DialTimeout {
		t.Errorf("Dial gave up after %v, within its dial timeout %v", d, cfg.DialTimeout)
	}
	if n := s.Stats().HandshakeFailures.TaskOwned - refusals; n < 2 {
		t.Errorf("%d task_owned refusals in %v, want Dial's retries counted", n, cfg.DialTimeout)
	}
}

// TestCloseReasons: every close for cause sends its close frame first.
func TestCloseReasons(t *testing.T) {
	t.Run("overloaded", func(t *testing.T) {
		s := startServer(t, func(c *ServerConfig) { c.MaxConns = 1 })
		a := rawDial(t, s.addr)
		defer a.Close()
		a.login(t, 1, taskRange{1, 1})
		b := rawDial(t, s.addr)
		defer b.Close()
		_, _ = b.Write(b.hello(testSecret, 2, taskRange{2, 1}))
		wantClose(t, b, closeOverloaded, "server at its connection limit (MaxConns 1)")
	})
	t.Run("dropped in the handshake", func(t *testing.T) {
		s := startServer(t, func(c *ServerConfig) { c.MaxHandshakes = 1 })
		a := rawDial(t, s.addr)
		defer a.Close()
		b := rawDial(t, s.addr) // a is the oldest: dropped
		defer b.Close()
		wantClose(t, a, closeOverloaded, "dropped in the handshake for a newer connection (MaxHandshakes 1)")
		b.login(t, 2, taskRange{2, 1})
		// The log says why, and how soon: not a handshake timeout.
		waitFor(t, 5*time.Second, "the drop in the log", func() bool {
			return strings.Contains(s.log.String(), "dropped in the handshake for a newer connection (MaxHandshakes 1), ")
		})
		if l := s.log.String(); strings.Contains(l, "no hello within") || !regexp.MustCompile(`MaxHandshakes 1\), [0-9.]+m?s after it connected`).MatchString(l) {
			t.Errorf("the drop logged as:\n%s", l)
		}
	})
	t.Run("replaced", func(t *testing.T) {
		s := startServer(t, nil)
		a := rawDial(t, s.addr)
		defer a.Close()
		a.login(t, 7, taskRange{3, 1})
		b := rawDial(t, s.addr)
		defer b.Close()
		b.login(t, 7, taskRange{3, 1})
		wantClose(t, a, closeReplaced, "replaced by a newer connection of client 0x7")
		// One format for client ids: hex in the close reason, the page
		// and every log line.
		waitFor(t, 5*time.Second, "the replacement in the log", func() bool {
			return strings.Contains(s.log.String(), `msg="netio: connection replaced by a newer one of the same client"`)
		})
		for _, line := range strings.Split(s.log.String(), "\n") {
			if strings.Contains(line, "client=") && !strings.Contains(line, "client=0x7") {
				t.Errorf("a client id not in hex: %s", line)
			}
		}
		if !strings.Contains(s.log.String(), `msg="netio: client connected" remote=`) || !strings.Contains(s.log.String(), "client=0x7 tasks=1") {
			t.Errorf("client connected, in hex:\n%s", s.log.String())
		}
	})
	t.Run("protocol error in the handshake", func(t *testing.T) {
		s := startServer(t, nil)
		a := rawDial(t, s.addr)
		defer a.Close()
		_, _ = a.Write(hdr(9437184, protoVersion, typeHello, 0))
		wantClose(t, a, closeProtocol, "frame length 9437184 exceeds limit 65536")
		b := rawDial(t, s.addr)
		defer b.Close()
		_, _ = b.Write(appendHeartbeat(nil))
		wantClose(t, b, closeProtocol, "expected hello")
	})
	t.Run("slow", func(t *testing.T) {
		s := startServer(t, func(c *ServerConfig) { c.WriteTimeout = 200 * time.Millisecond; c.MaxConnPending = 1 << 14 })
		a := rawDial(t, s.addr)
		defer a.Close()
		a.login(t, 1, taskRange{1, 1})
		_ = a.SetDeadline(time.Time{})
		// Trees until the server gives up on us, from a goroutine whose
		// writes block (no deadline: a write cut short would leave the
		// server half a frame).
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			rng := rand.New(rand.NewPCG(3, 3))
			var b []ackcore.Msg
			for root := uint64(1); root < 1<<24; root++ {
				b = append(b, tree(rng, root, 1, 1)...)
				if len(b) < 2000 {
					continue
				}
				if _, err := a.Write(appendMsgs(nil, b)); err != nil {
					return
				}
				b = b[:0]
			}
		}()
		waitFor(t, 20*time.Second, "the client closed as slow", func() bool { return s.Stats().SlowClosed > 0 })
		// Reading now, the client finds whole frames and the reason.
		_ = a.SetReadDeadline(time.Now().Add(10 * time.Second))
		a.fr.SetLimit(64 << 20)
		wantClose(t, a, closeSlow, "client took no bytes for 200ms (write timeout)")
		a.Close()
		<-wrote
	})
	t.Run("held by backpressure, peer gone", func(t *testing.T) {
		s := startServer(t, func(c *ServerConfig) { c.MaxConnPending = 100 })
		a := rawDial(t, s.addr)
		a.login(t, 1, taskRange{1, 1})
		var b []ackcore.Msg
		for i := range 1000 { // never completed: the reader waits for room
			b = append(b, ackcore.Msg{Root: uint64(i + 1), Kind: ackcore.Init, Task: 1, Val: 1})
		}
		_, _ = a.Write(appendMsgs(nil, b[:500]))
		_, _ = a.Write(appendMsgs(nil, b[500:]))
		waitFor(t, 5*time.Second, "the reader to be held", func() bool {
			cs := s.Conns()
			return len(cs) == 1 && cs[0].Pending >= 500
		})
		a.Close()
		// Before: noticed at the writer's second heartbeat, up to 19 s.
		waitFor(t, 3*time.Second, "the server to see the client gone", func() bool { return s.Stats().Open == 0 })
		// The frame it held back for room is applied all the same.
		waitFor(t, 3*time.Second, "the held frame applied", func() bool { return s.Stats().Acker.Inits == 1000 })
	})
}

// TestMemoryComesBack: never-reading connections at the max frame size,
// each holding what a connection can (a full read buffer, a decoded
// frame, outcomes up to MaxConnPending queued), cost at most
// Server.ConnBytes each, and once they are closed the heap goes back to
// within 10 MiB of where it was (and within half a connection's cost).
func TestMemoryComesBack(t *testing.T) {
	testkit.SkipUnderInvariants(t, "tables of tens of thousands of roots or more: the invariant checks (O(table) an Apply) take minutes; the differential tests run them")
	if race.Enabled {
		t.Skip("the race detector shadows the heap it weighs (a connection measured 8.2 MiB against its 7.3 MiB formula under -race)")
	}
	n := 100
	if testing.Short() {
		n = 8
	}
	s := startServer(t, func(c *ServerConfig) {
		c.MaxConns = n + 2
		c.Tasks = n + 2
		c.WriteTimeout = time.Minute // held, not closed as slow
		// The handshakes of the last connections race the flood of the
		// first ones for the CPU: on a busy machine they passed the
		// default 3 s (the welcome never came). This test is about
		// memory, not the handshake bound.
		c.HandshakeTimeout = time.Minute
		// Room to spare: a hundred connections flooding at once run
		// their held counts ahead of the table by what waits for the
		// router, past a share of a smaller table (see the contract).
		c.Shard.MaxPending = 1 << 22
		// A quarter of the default outcome bound: the same buffers at
		// their bound, a quarter of the roots to push through the acker
		// to get there (6.5 M at the default took over a minute in CI's
		// parallel run).
		c.MaxConnPending = 1 << 14
	})
	heap := func() int64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	base := heap()
	var conns []*rawConn
	var wg sync.WaitGroup
	defer func() {
		for _, rc := range conns { // a no-op once closed below
			rc.Close()
		}
		wg.Wait()
	}()
	for i := range n {
		rc := rawDial(t, s.addr)
		// A small receive buffer: the server's writer blocks after less.
		_ = rc.Conn.(*net.TCPConn).SetReadBuffer(4 << 10)
		rc.login(t, uint64(i+1), taskRange{uint32(i), 1})
		_ = rc.SetDeadline(time.Time{})
		conns = append(conns, rc)
		// Max-size frames of trees until the server stops reading (its
		// reader at the outcome bound, its writer blocked on our full
		// receive buffer); the write blocks then, until the connection is
		// closed.
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(5, uint64(i)))
			frame := make([]ackcore.Msg, 0, maxMsgsPerFrame(DefaultMaxFrame))
			root := uint64(i+1) << 32
			for {
				frame = frame[:0]
				for len(frame)+2 <= cap(frame) {
					root++
					frame = append(frame, tree(rng, root, uint32(i), 1)...)
				}
				if _, err := rc.Write(appendMsgs(nil, frame)); err != nil {
					return
				}
			}
		})
	}
	// Held: each reader waits for room (every root it took has its
	// outcome queued, unwritten).
	waitFor(t, 60*time.Second, "every connection at its bound", func() bool {
		k := 0
		for _, cs := range s.Conns() {
			if cs.Pending > int64(s.cfg.MaxConnPending-maxMsgsPerFrame(DefaultMaxFrame)) {
				k++
			}
		}
		return k == n
	})
	per := (heap() - base) / int64(n)
	if per > s.ConnBytes() {
		t.Errorf("a never-reading connection holds %d bytes, past ConnBytes %d", per, s.ConnBytes())
	}
	for _, rc := range conns {
		rc.Close()
	}
	conns = nil // our side's buffers (64 KiB a read buffer) are not the server's
	waitFor(t, 30*time.Second, "the connections to close", func() bool { return s.Stats().Open == 0 })
	after := heap()
	// Within 10 MiB of the baseline, and less than half a connection's
	// worth: one closed connection kept reachable would show.
	if grew := after - base; grew > min(10<<20, per/2) {
		t.Fatalf("heap %.1f MiB after the connections closed, %.1f MiB before them", float64(after)/(1<<20), float64(base)/(1<<20))
	}
	t.Logf("%d never-reading connections: %.1f MiB each (ConnBytes %.1f MiB); heap %.1f MiB before, %.1f MiB after",
		n, float64(per)/(1<<20), float64(s.ConnBytes())/(1<<20), float64(base)/(1<<20), float64(after)/(1<<20))
}

// TestStopRace: senders sending trees while the client stops at a
// moment of the iteration's choosing: every INIT a Send accepted gets
// exactly one outcome (the server's, or Failed{stopped}, or
// Failed{acker lost}), none is lost without a word (the netio client's
// part of the rule that Stop loses nothing silently).
func TestStopRace(t *testing.T) {
	s := startServer(t, nil)
	iters := 40
	if testing.Short() {
		iters = 10
	}
	const senders = 4
	for it := range iters {
		cfg := clientCfg(s.addr)
		cfg.ID = 1000 // one client, reconnecting: it takes its tasks over
		c := mustDial(t, cfg, acker.Spec{Producers: senders, Tasks: senders})
		var accepted [senders]atomic.Int64
		var wg sync.WaitGroup
		for p := range senders {
			wg.Go(func() {
				sd := c.Sender(p)
				for root := uint64(1); ; root++ {
					id := uint64(it)<<40 | uint64(p)<<32 | root
					if err := sd.Send(ackcore.Msg{Root: id, Kind: ackcore.Init, Task: uint32(p), Val: 1}); err != nil {
						_ = sd.Flush() // fails what it staged and never handed over
						return
					}
					accepted[p].Add(1)
					if err := sd.Send(ackcore.Msg{Root: id, Kind: ackcore.Ack, Val: 1}); err != nil {
						_ = sd.Flush()
						return
					}
					if root%(1+uint64(it%7)) == 0 {
						_ = sd.Flush()
					}
				}
			})
		}
		at := int64(1 + it*97%3000)
		waitFor(t, 5*time.Second, "the senders to start", func() bool {
			n := int64(0)
			for p := range senders {
				n += accepted[p].Load()
			}
			return n >= at
		})
		c.Stop()
		wg.Wait()
		for p := range senders {
			got := map[uint64]int{}
			for _, o := range c.Inbox(p).Poll(nil) {
				got[o.Root]++
			}
			for root, k := range got {
				if k != 1 {
					t.Fatalf("iteration %d: root %#x got %d outcomes", it, root, k)
				}
			}
			if n := int64(len(got)); n != accepted[p].Load() {
				t.Fatalf("iteration %d, sender %d: %d INITs accepted, %d outcomes", it, p, accepted[p].Load(), n)
			}
		}
	}
}

// TestSharesOff: ShareSlack at the table's size turns the shares off: a
// connection's allocation binds nothing (its INITs take the reader's
// fast path), and two connections may hold what the acker takes.
func TestSharesOff(t *testing.T) {
	const bound = 1 << 12
	s := startServer(t, func(c *ServerConfig) { c.Shard.MaxPending = bound; c.ShareSlack = bound })
	if sh := s.Share(); sh < math.MaxInt64/4 {
		t.Fatalf("Share %d with the shares off", sh)
	}
	for i := range 2 {
		cfg := clientCfg(s.addr)
		cfg.TaskBase, cfg.ID = uint32(i), uint64(i+1)
		c := mustDial(t, cfg, acker.Spec{Producers: 1, Tasks: 1})
		defer c.Stop()
		p := c.Sender(0)
		for r := range 3 * bound / 4 {
			_ = p.Send(ackcore.Msg{Root: uint64(r+1)<<8 | uint64(i), Kind: ackcore.Init, Val: 1})
		}
		_ = p.Flush()
	}
	// Every INIT held or refused by the acker at its bound.
	waitFor(t, 5*time.Second, "the INITs to be taken", func() bool {
		st := s.Stats()
		return st.Acker.Inits >= 3*bound/2 && int64(st.Acker.Pending)+int64(st.Acker.FailedFull) >= 3*bound/2
	})
	if st := s.Stats(); st.InitsRefused != 0 || st.Acker.FailedFull == 0 {
		t.Errorf("shares off: %d refused by the server, %d by the acker, want 0 and the acker's bound", st.InitsRefused, st.Acker.FailedFull)
	}
	for _, cs := range s.Conns() {
		if cs.Alloc < math.MaxInt64/4 {
			t.Errorf("client %#x: Alloc %d with the shares off", cs.ClientID, cs.Alloc)
		}
	}
}
