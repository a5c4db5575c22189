package netio

import (
	"log/slog"
	"testing"
	"time"
	"unsafe"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/layout"
)

// A topology's status page asks its acker port for this method (topology's
// oldestBySpout): a client has it with the in-process acker's signature,
// so a remote acker's oldest roots show there as a local one's do.
var _ interface {
	OldestPending(n int) []ackcore.PendingRoot
} = (*Client)(nil)

// TestServerObservers: what an admin endpoint reads of a running server
// (handshake failures by cause, frames and bytes both ways, the oldest
// pending root and the client owning its task, per-shard stats) says
// what happened.
func TestServerObservers(t *testing.T) {
	s := startServer(t, func(c *ServerConfig) { c.Shards = 2 })
	waitFor(t, 5*time.Second, "Accepting", s.Accepting) // Serve runs on its own goroutine
	bad := clientCfg(s.addr)
	bad.Secret = []byte("not-the-secret-0123456789")
	if _, err := Dial(bad, oneTask); err == nil {
		t.Fatal("wrong secret connected")
	}
	cfg := clientCfg(s.addr)
	cfg.ID, cfg.TaskBase = 0x77, 5
	c := mustDial(t, cfg, oneTask)
	defer c.Stop()
	// One root completes, one stays pending (local task 0 is task 5 on the
	// server).
	snd := c.Sender(0)
	for _, m := range []ackcore.Msg{{Root: 11, Kind: ackcore.Init, Task: 0, Val: 3}, {Root: 11, Kind: ackcore.Ack, Val: 3},
		{Root: 12, Kind: ackcore.Init, Task: 0, Val: 9}} {
		if err := snd.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	_ = snd.Flush()
	if got := collect(t, c.Inbox(0), 1, 5*time.Second); got[11] == nil {
		t.Fatalf("outcomes %v, want root 11's", got)
	}
	waitFor(t, 5*time.Second, "the shards' stats", func() bool {
		var sum ackcore.Stats
		for i := range s.Shards() {
			sum.Add(s.ShardStats(i))
		}
		st := s.Stats()
		// The frame and byte counts are added after the read batch and
		// the write, which the client's outcome may overtake.
		return sum.Completed == 1 && sum.Inits == 2 && st.Acker.Completed == 1 && st.FramesIn >= 1 && st.BytesOut > 0
	})
	st := s.Stats()
	if st.HandshakeFailures != (HandshakeFailures{Auth: 1}) || st.HandshakeFails != 1 {
		t.Errorf("handshake failures %+v (%d), want one auth", st.HandshakeFailures, st.HandshakeFails)
	}
	if st.FramesIn < 1 || st.BytesIn < headerSize+3*msgSize || st.FramesOut < 1 || st.BytesOut < headerSize+outcomeSize {
		t.Errorf("frames in %d (%d bytes), out %d (%d bytes)", st.FramesIn, st.BytesIn, st.FramesOut, st.BytesOut)
	}
	old := s.OldestPending(10)
	if len(old) != 1 || old[0].Root != 12 || old[0].Task != 5 || old[0].Age < 0 {
		t.Fatalf("OldestPending %+v, want root 12 on task 5", old)
	}
	if id, remote, ok := s.TaskOwner(5); !ok || id != 0x77 || remote == "" {
		t.Errorf("TaskOwner(5) = %#x %q %v", id, remote, ok)
	}
	if _, _, ok := s.TaskOwner(6); ok {
		t.Error("TaskOwner(6) found an owner")
	}
	if _, _, ok := s.TaskOwner(1 << 30); ok {
		t.Error("TaskOwner past Tasks found an owner")
	}
	shutdown(t, s)
	if s.Accepting() {
		t.Error("Accepting true after Shutdown")
	}
}

// TestServerCounterLines: the readers', the router's and the writers'
// shared counters sit on cache lines of their own.
func TestServerCounterLines(t *testing.T) {
	var s Server
	lines := map[string]uintptr{
		"readers": unsafe.Offsetof(s.msgs) / layout.CacheLine, "router": unsafe.Offsetof(s.outcomes) / layout.CacheLine,
		"writers": unsafe.Offsetof(s.bytesOut) / layout.CacheLine,
	}
	if lines["readers"] != (unsafe.Offsetof(s.bytesIn)+7)/layout.CacheLine || lines["router"] != (unsafe.Offsetof(s.framesOut)+7)/layout.CacheLine ||
		lines["readers"] == lines["router"] || lines["router"] == lines["writers"] ||
		unsafe.Offsetof(s.msgs)/layout.CacheLine == (unsafe.Offsetof(s.hsCause)+unsafe.Sizeof(s.hsCause)-1)/layout.CacheLine ||
		(unsafe.Offsetof(s.bytesOut)+8)%layout.CacheLine != 0 && unsafe.Sizeof(s) < unsafe.Offsetof(s.bytesOut)+layout.CacheLine {
		t.Fatalf("counter lines %v", lines)
	}
}

// TestClientHosts: the client's view of its hosts says which is up, why
// the other is not, what went each way, and which root it still waits
// for, on which host.
func TestClientHosts(t *testing.T) {
	s := startServer(t, nil)
	refused := closedAddr(t)
	cfg := clientCfg(s.addr, refused)
	cfg.Logger = slog.New(slog.DiscardHandler)
	c := mustDial(t, cfg, oneTask)
	defer c.Stop()
	snd := c.Sender(0)
	for _, m := range []ackcore.Msg{{Root: 21, Kind: ackcore.Init, Val: 3}, {Root: 21, Kind: ackcore.Ack, Val: 3},
		{Root: 22, Kind: ackcore.Init, Val: 9}} {
		if err := snd.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	_ = snd.Flush()
	if got := collect(t, c.Inbox(0), 1, 5*time.Second); got[21] == nil {
		t.Fatalf("outcomes %v, want root 21's", got)
	}
	var hs []HostStats
	waitFor(t, 5*time.Second, "the read batch and the write counted", func() bool {
		hs = c.Hosts()
		return hs[0].FramesIn >= 1 && hs[0].BytesOut > 0 // each added after its read or write returned
	})
	good, bad := hs[0], hs[1]
	if good.Addr != s.addr || !good.Up || good.Connections != 1 || good.ConnectFailures != 0 || good.LastError != "" ||
		good.Pending != 1 || good.Completed != 1 || good.FramesOut < 1 || good.BytesOut < headerSize+3*msgSize ||
		good.BytesIn < headerSize+outcomeSize {
		t.Errorf("good host %+v", good)
	}
	if bad.Addr != refused || bad.Up || bad.Connections != 0 || bad.ConnectFailures < 1 ||
		bad.LastError != "cannot connect: connect: connection refused" || bad.Pending != 0 {
		t.Errorf("refused host %+v", bad)
	}
	old := c.OldestPending(5)
	if len(old) != 1 || old[0].Root != 22 || old[0].Task != 0 || old[0].Age < 0 || old[0].Deadline != 0 {
		t.Fatalf("OldestPending %+v", old)
	}
	if c.OldestPending(0) != nil {
		t.Error("OldestPending(0) is not nil")
	}
}
