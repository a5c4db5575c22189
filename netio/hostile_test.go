package netio

import (
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// rawConn is a hand-driven client connection.
type rawConn struct {
	net.Conn
	fr *frameReader
	ch challengeBody
}

// rawDial connects and reads the challenge.
func rawDial(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second) // as the deadline below: a busy machine took over 2 s
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	rc := &rawConn{Conn: c, fr: newFrameReader(c, DefaultMaxFrame)}
	f, err := rc.fr.Next()
	if err != nil || f.Type != typeChallenge {
		t.Fatalf("challenge: %v %v", f.Type, err)
	}
	if rc.ch, err = decodeChallenge(f.Body); err != nil {
		t.Fatal(err)
	}
	return rc
}

// hello returns a hello frame for tasks, signed with secret.
func (rc *rawConn) hello(secret []byte, id uint64, tasks ...taskRange) []byte {
	h := helloBody{ClientID: id, MaxFrame: DefaultMaxFrame, Tasks: tasks}
	h.MAC = helloMAC(secret, &rc.ch.Nonce, &h)
	return appendHello(nil, &h)
}

// login completes the handshake.
func (rc *rawConn) login(t testing.TB, id uint64, tasks ...taskRange) {
	t.Helper()
	if _, err := rc.Write(rc.hello(testSecret, id, tasks...)); err != nil {
		t.Fatal(err)
	}
	f, err := rc.fr.Next()
	if err != nil || f.Type != typeWelcome {
		t.Fatalf("welcome: type %d, %v", f.Type, err)
	}
}

// closedWith reads until the server closes; it returns the close
// frame's reason, if one came.
func (rc *rawConn) closedWith(t testing.TB) string {
	t.Helper()
	reason := ""
	for {
		f, err := rc.fr.Next()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the server did not close the connection")
			}
			return reason
		}
		if f.Type == typeClose {
			_, reason, _ = decodeClose(f.Body)
		}
	}
}

// goodClient runs a client that completes trees while hostile ones do
// their worst; check reports whether every tree completed.
func goodClient(t *testing.T, addr string, task uint32) (stop func() int) {
	cfg := clientCfg(addr)
	cfg.TaskBase = task
	c := mustDial(t, cfg, acker.Spec{Producers: 1, Tasks: 1})
	quit := make(chan struct{})
	res := make(chan int)
	go func() {
		rng := rand.New(rand.NewPCG(uint64(task), 9))
		p, ib := c.Sender(0), c.Inbox(0)
		sent, done := 0, 0
		var buf []ackcore.Outcome
		for running := true; running || done < sent; {
			select {
			case <-quit:
				running = false
			default:
			}
			if running && sent-done < 1000 {
				for range 50 {
					sent++
					_ = p.SendBatch(tree(rng, uint64(sent)<<8|uint64(task), 0, 4))
				}
				_ = p.Flush()
			}
			var ok bool
			buf, ok = ib.WaitUntil(buf[:0], time.After(time.Millisecond))
			for _, o := range buf {
				if o.Kind == ackcore.Completed {
					done++
				} else {
					t.Errorf("good client: root %#x %v %v", o.Root, o.Kind, o.Reason)
					done++
				}
			}
			if !ok {
				break
			}
		}
		res <- done
	}()
	return func() int {
		close(quit)
		n := <-res
		c.Stop()
		return n
	}
}

// TestHostileClients: a slow handshake, a wrong secret followed by
// frames, an oversized length prefix before and after the handshake,
// every malformed frame of the table, a stolen task, and an INIT for a
// task not owned: each is closed with a logged reason, nothing reaches the
// acker from an unauthenticated connection, and a good client keeps
// completing its trees throughout.
func TestHostileClients(t *testing.T) {
	s := startServer(t, func(c *ServerConfig) { c.HandshakeTimeout = 300 * time.Millisecond })
	stop := goodClient(t, s.addr, 0)
	defer func() {
		if n := stop(); n == 0 {
			t.Error("the good client completed nothing")
		}
	}()

	t.Run("slow handshake", func(t *testing.T) {
		rc := rawDial(t, s.addr)
		defer rc.Close()
		t0 := time.Now()
		if r := rc.closedWith(t); !strings.Contains(r, "no hello within the handshake timeout 300ms") {
			t.Fatalf("close reason %q", r)
		}
		if d := time.Since(t0); d > 3*time.Second {
			t.Fatalf("closed after %v, handshake timeout 300ms", d)
		}
		waitFor(t, 2*time.Second, "the log", func() bool { return strings.Contains(s.log.String(), "no hello within") })
	})
	before := s.Stats().Msgs
	t.Run("wrong secret then frames", func(t *testing.T) {
		rc := rawDial(t, s.addr)
		defer rc.Close()
		b := rc.hello([]byte("not-the-secret-at-all"), 77, taskRange{1, 1})
		rng := rand.New(rand.NewPCG(1, 1))
		for i := range 100 {
			b = appendMsgs(b, tree(rng, uint64(i+1), 1, 3))
			// The good client never sends FAIL: any FAIL the acker
			// counts came from here.
			b = appendMsgs(b, []ackcore.Msg{{Root: uint64(i + 1), Kind: ackcore.Fail}})
		}
		_, _ = rc.Write(b)
		if r := rc.closedWith(t); r != "hello MAC does not match" {
			t.Fatalf("close reason %q", r)
		}
		waitFor(t, 2*time.Second, "the log", func() bool { return strings.Contains(s.log.String(), "hello MAC does not match") })
	})
	t.Run("oversized prefix before the handshake", func(t *testing.T) {
		rc := rawDial(t, s.addr)
		defer rc.Close()
		_, _ = rc.Write(hdr(9437184, protoVersion, typeHello, 0))
		rc.closedWith(t)
		waitFor(t, 2*time.Second, "the log", func() bool {
			return strings.Contains(s.log.String(), "frame length 9437184 exceeds limit 65536")
		})
	})
	if got := s.Stats().Msgs; got < before {
		t.Fatal("counter went back")
	}
	authed := func(t *testing.T, id uint64, task uint32, frame []byte, want string) {
		rc := rawDial(t, s.addr)
		defer rc.Close()
		rc.login(t, id, taskRange{task, 1})
		_, _ = rc.Write(frame)
		if r := rc.closedWith(t); !strings.Contains(r, want) {
			t.Fatalf("close reason %q, want %q", r, want)
		}
		waitFor(t, 2*time.Second, "the log", func() bool { return strings.Contains(s.log.String(), want) })
	}
	t.Run("oversized prefix after the handshake", func(t *testing.T) {
		authed(t, 5, 5, hdr(9437184, protoVersion, typeMsgs, 0), "netio: frame length 9437184 exceeds limit 1048576")
	})
	t.Run("INIT for a task not owned", func(t *testing.T) {
		authed(t, 6, 6, appendMsgs(nil, []ackcore.Msg{{Root: 1, Kind: ackcore.Init, Task: 7}}), "names task 7, not owned")
	})
	t.Run("a frame whose last record is bad", func(t *testing.T) {
		// Decoded straight into the acker's ring (one shard), the
		// frame's valid FAILs before the bad record must not be staged:
		// the check after the subtests finds no FAIL counted.
		var fails []ackcore.Msg
		for i := range 200 {
			fails = append(fails, ackcore.Msg{Root: uint64(i + 1), Kind: ackcore.Fail})
		}
		frame := appendMsgs(nil, append(fails, ackcore.Msg{Root: 1, Kind: ackcore.Ack, Task: 3}))
		authed(t, 7, 7, frame, "message 200 of 201")
	})
	t.Run("outcomes from a client", func(t *testing.T) {
		authed(t, 6, 6, appendOutcomes(nil, goldenOutcomes), "unexpected outcomes frame")
	})
	t.Run("task owned by another client", func(t *testing.T) {
		rc := rawDial(t, s.addr)
		defer rc.Close()
		_, _ = rc.Write(rc.hello(testSecret, 99, taskRange{0, 1})) // the good client's task
		if r := rc.closedWith(t); !strings.Contains(r, "claims task 0, owned by client") {
			t.Fatalf("close reason %q", r)
		}
	})
	t.Run("malformed table", func(t *testing.T) {
		for i, tc := range malformedFrames() {
			rc := rawDial(t, s.addr)
			rc.login(t, 1000+uint64(i), taskRange{8, 1})
			_, _ = rc.Write([]byte(tc))
			rc.closedWith(t)
			rc.Close()
		}
	})
	if e := s.Stats().ProtocolErrors; e < 3 {
		t.Fatalf("%d protocol errors counted", e)
	}
	// The acker's counters are a tick old: wait until they moved on
	// twice (the good client keeps sending), then no FAIL may be counted.
	i0 := s.Stats().Acker.Inits
	waitFor(t, 5*time.Second, "fresh acker counters", func() bool { return s.Stats().Acker.Inits > i0+100 })
	if f := s.Stats().Acker.Fails; f != 0 {
		t.Fatalf("the acker applied %d FAILs from an unauthenticated connection", f)
	}
}

// malformedFrames are frames a server must refuse after the handshake.
func malformedFrames() []string {
	rec := make([]byte, msgSize)
	putU64(rec, 1)
	putU32(rec[16:], 9<<24)
	return []string{
		string(hdr(9437184, protoVersion, typeMsgs, 0)),
		string(hdr(7, protoVersion, typeHeartbeat, 0)),
		string(hdr(8, 2, typeHeartbeat, 0)),
		string(hdr(8, protoVersion, 0, 0)),
		string(hdr(8, protoVersion, typeHeartbeat, 1)),
		string(cat(hdr(8+23, protoVersion, typeMsgs, 0), make([]byte, 23))),
		string(cat(hdr(8+24, protoVersion, typeMsgs, 0), rec)),
		string(cat(hdr(8+24, protoVersion, typeMsgs, 0), make([]byte, 24))),
		string(appendChallenge(nil, &goldenChallenge)),
		string(appendWelcome(nil, &goldenWelcome)),
	}
}

// TestNeverReadingClient: a client that sends complete trees and never
// reads its outcomes is held to MaxConnPending roots (the server stops
// reading it), then closed once its socket takes nothing for the write
// timeout; the server's heap stays bounded and a good client is served
// throughout.
func TestNeverReadingClient(t *testing.T) {
	s := startServer(t, func(c *ServerConfig) {
		c.MaxConnPending = 2000
		c.WriteTimeout = 300 * time.Millisecond
		// A small table: with -tags invariants every Apply walks it.
		c.Shard.MaxPending = 8192
	})
	stop := goodClient(t, s.addr, 0)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap0 := ms.HeapInuse

	rc := rawDial(t, s.addr)
	defer rc.Close()
	rc.login(t, 42, taskRange{1, 1})
	_ = rc.SetDeadline(time.Time{})
	// Write until the server stops taking bytes: its reader blocked on
	// the pending bound, its writer on our full receive buffer.
	rng := rand.New(rand.NewPCG(7, 7))
	var b []ackcore.Msg
	wrote := 0
	for root := uint64(1); ; root++ {
		b = append(b, tree(rng, root, 1, 2)...)
		if len(b) < 3000 {
			continue
		}
		_ = rc.SetWriteDeadline(time.Now().Add(time.Second))
		n, err := rc.Write(appendMsgs(nil, b))
		wrote += n
		b = b[:0]
		if err != nil {
			break
		}
		if root > 50_000_000 {
			t.Fatal("the server never stopped reading")
		}
	}
	waitFor(t, 30*time.Second, "the slow client to be closed", func() bool { return s.Stats().SlowClosed >= 1 })
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if grew := int64(ms.HeapInuse) - int64(heap0); grew > 64<<20 {
		t.Fatalf("heap grew %d MiB while a client did not read (it wrote %d MiB)", grew>>20, wrote>>20)
	}
	if n := stop(); n == 0 {
		t.Fatal("the good client completed nothing")
	}
	t.Logf("the never-reading client got %d MiB in before the server stopped reading it", wrote>>20)
}

// TestConnectFlood: thousands of connections that never handshake, in
// waves far over MaxHandshakes: the oldest are dropped as new ones come,
// goroutines stay bounded, and a good client keeps working.
func TestConnectFlood(t *testing.T) {
	s := startServer(t, func(c *ServerConfig) {
		c.MaxConns = 16
		c.MaxHandshakes = 16
		c.HandshakeTimeout = 200 * time.Millisecond
	})
	stop := goodClient(t, s.addr, 0)
	g0 := runtime.NumGoroutine()
	waves, per := 15, 200
	if testing.Short() {
		waves = 5
	}
	maxG := 0
	for w := 0; w < waves; w++ {
		var conns idleConns
		var wg sync.WaitGroup
		for range per {
			wg.Go(func() {
				conns.dial(s.addr)
			})
		}
		wg.Wait()
		// Let the server see them; its goroutines are the count that
		// matters, ours (per connection: none now) are gone.
		waitFor(t, 5*time.Second, "the server to accept the wave", func() bool {
			st := s.Stats()
			return st.Accepted >= uint64((w+1)*per)
		})
		// The dropped ones are on their way out: at most MaxHandshakes
		// stay, beside the good client.
		waitFor(t, 5*time.Second, "the dropped handshakes to go", func() bool { return s.Stats().Open <= 16+1 })
		maxG = max(maxG, runtime.NumGoroutine())
		conns.closeAll()
	}
	st := s.Stats()
	if st.HandshakesDropped == 0 {
		t.Fatalf("no handshake dropped: %+v", st)
	}
	// 2 per connection slot (reader, writer), 1 per handshake, a few
	// for the good client's side.
	if limit := g0 + 2*16 + 16 + 8; maxG > limit {
		t.Fatalf("%d goroutines at the peak, want at most %d", maxG, limit)
	}
	if n := stop(); n == 0 {
		t.Fatal("the good client completed nothing")
	}
	waitFor(t, 5*time.Second, "connections to drain", func() bool { return s.Stats().Open <= 1 })
	t.Logf("%d connects: %d dropped in the handshake, %d handshakes failed; peak goroutines %d (baseline %d)",
		st.Accepted, st.HandshakesDropped, st.HandshakeFails, maxG, g0)
}

var _ = io.EOF
