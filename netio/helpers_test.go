package netio

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

var testSecret = []byte("0123456789abcdef-test-secret")

// syncBuf is a log sink tests can read while servers write to it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testServer runs a server on a loopback port.
type testServer struct {
	*Server
	addr string
	log  *syncBuf
	done chan error
}

func startServer(t testing.TB, mod func(*ServerConfig)) *testServer {
	t.Helper()
	lb := &syncBuf{}
	cfg := ServerConfig{
		Secret: testSecret, Shard: ackcore.Config{MaxPending: 1 << 16, Timeout: 10 * time.Second},
		Tasks: 64, MaxConns: 16, Logger: slog.New(slog.NewTextHandler(lb, nil)),
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: s, addr: ln.Addr().String(), log: lb, done: make(chan error, 1)}
	go func() { ts.done <- s.Serve(ln) }()
	t.Cleanup(func() { ts.Close() })
	return ts
}

func clientCfg(addrs ...string) ClientConfig {
	return ClientConfig{Hosts: addrs, Secret: testSecret, DialTimeout: 2 * time.Second,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond}
}

// dialNew starts a server with startServer's settings and dials a client
// to it with clientCfg's, edit applied to them (nil: none), for spec.
func dialNew(t testing.TB, spec acker.Spec, edit func(*ClientConfig)) (*testServer, *Client) {
	t.Helper()
	s := startServer(t, nil)
	cfg := clientCfg(s.addr)
	if edit != nil {
		edit(&cfg)
	}
	return s, mustDial(t, cfg, spec)
}

// mustDial dials a client, or fails the test.
func mustDial(t testing.TB, cfg ClientConfig, spec acker.Spec) *Client {
	t.Helper()
	c, err := Dial(cfg, spec)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sendTrees sends through p, in order, the trees (task 0, fanout ACKs) of
// roots 1 to n, each as edit(root, its messages) returns it, and flushes.
func sendTrees(t *testing.T, p acker.Sender, rng *rand.Rand, n, fanout int, edit func(root int, msgs []ackcore.Msg) []ackcore.Msg) {
	t.Helper()
	for i := 1; i <= n; i++ {
		if err := p.SendBatch(edit(i, tree(rng, uint64(i), 0, fanout))); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
}

// tally counts outcomes: the completed in completed, the others in
// failed by reason.
func tally(os []ackcore.Outcome, completed *int, failed map[ackcore.Reason]int) {
	for _, o := range os {
		if o.Kind == ackcore.Completed {
			*completed++
		} else {
			failed[o.Reason]++
		}
	}
}

// tree is one root's messages: an INIT naming task and fanout ACKs that
// zero its val.
func tree(rng *rand.Rand, root uint64, task uint32, fanout int) []ackcore.Msg {
	edges := make([]uint64, fanout)
	var x uint64
	for i := range edges {
		edges[i] = rng.Uint64() | 1
		x ^= edges[i]
	}
	msgs := []ackcore.Msg{{Root: root, Kind: ackcore.Init, Task: task, Val: x}}
	for _, e := range edges {
		msgs = append(msgs, ackcore.Msg{Root: root, Kind: ackcore.Ack, Val: e})
	}
	return msgs
}

// treeStream is an endless stream of trees of one shape (an INIT and k
// ACKs each) over treeStreamRoots roots, renumbered per pass so that
// every tree is a new root.
type treeStream struct {
	msgs  []ackcore.Msg
	k     int
	pos   int
	cycle uint64
}

const treeStreamRoots = 4096

func newTreeStream(rng *rand.Rand, k int) *treeStream {
	s := &treeStream{k: k}
	for i := range treeStreamRoots {
		s.msgs = append(s.msgs, tree(rng, uint64(i+1), 0, k)...)
	}
	return s
}

// next returns the stream's next message.
func (s *treeStream) next() ackcore.Msg {
	m := s.msgs[s.pos]
	m.Root += s.cycle * treeStreamRoots
	if s.pos++; s.pos == len(s.msgs) {
		s.pos, s.cycle = 0, s.cycle+1
	}
	return m
}

// atTree reports whether the next message begins a tree.
func (s *treeStream) atTree() bool { return s.pos%(s.k+1) == 0 }

// collect polls inbox until n outcomes arrived or the deadline passes,
// returning them by root.
func collect(t testing.TB, ib acker.Inbox, n int, d time.Duration) map[uint64][]ackcore.Outcome {
	t.Helper()
	got := map[uint64][]ackcore.Outcome{}
	total := 0
	// Closed at the deadline, not a tick: a tick WaitUntil takes is gone,
	// and the next wait would outlast the deadline (forever, with no
	// outcome coming).
	deadline := make(chan time.Time)
	stop := time.AfterFunc(d, func() { close(deadline) })
	defer stop.Stop()
	var buf []ackcore.Outcome
	for total < n {
		var ok bool
		buf, ok = ib.WaitUntil(buf[:0], deadline)
		for _, o := range buf {
			got[o.Root] = append(got[o.Root], o)
			total++
		}
		if !ok || len(buf) == 0 {
			select {
			case <-deadline:
				t.Fatalf("got %d outcomes of %d before the deadline", total, n)
			default:
			}
			if !ok {
				t.Fatalf("inbox closed after %d outcomes of %d", total, n)
			}
		}
	}
	return got
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			var b strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
			t.Fatalf("timed out waiting for %s; goroutines:\n%s", what, b.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitProgress polls progress until it reaches target, failing only when
// it has not advanced for d: a deadline that stretches with a busy
// machine's pace and still catches a stall.
func waitProgress(t testing.TB, d time.Duration, what string, target uint64, progress func() uint64) {
	t.Helper()
	last := progress()
	deadline := time.Now().Add(d)
	for last < target {
		if now := progress(); now > last {
			last, deadline = now, time.Now().Add(d)
			continue
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
			t.Fatalf("timed out waiting for %s: %d of %d, none for %v; goroutines:\n%s", what, last, target, d, b.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func shutdown(t testing.TB, s *testServer) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}
