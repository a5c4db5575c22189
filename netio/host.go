package netio

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// host is one ackerd server as the client sees it: its connection
// manager, its outbound buffer and its table of pending roots.
//
// A sender's hand-over appends a frame to out and the frame's INITs to
// inits, under mu; the writer takes both at once, registers the INITs in
// the pending table (under pendMu), and only then writes the bytes, so
// an outcome always finds its root registered, and the producers never
// wait on the table's cache misses (the writer registers a whole turn's
// INITs at once, their probes overlapping).
type host struct {
	c    *Client
	idx  int
	addr string
	key  uint64
	up   atomic.Bool // connected and handshaken; mirrors upL

	mu         sync.Mutex
	cond       *sync.Cond    // senders waiting for room in out
	waiters    int           // guarded by mu: senders waiting on cond
	upL        bool          // guarded by mu
	gen        uint64        // guarded by mu: connection generation
	out        []byte        // guarded by mu: frames for the writer
	inits      []initRec     // guarded by mu: their INITs, not yet registered
	qfullL     bool          // guarded by mu: len(out) at QueueBytes; mirrored in qfull
	writerIdle bool          // guarded by mu: the writer waits for wake
	wake       chan struct{} // guarded by mu: the current writer's
	conn       net.Conn      // guarded by mu
	qfull      atomic.Bool   // out at the bound, for TrySend

	pendMu sync.Mutex
	pend   pendTable // guarded by pendMu: root -> pend value (see pendCount)
	genP   uint64    // guarded by pendMu: the generation pend belongs to (0: none)

	cnt   outCounts     // outcomes delivered by the reader, the writer and lose
	io    ioCounts      // frames and bytes both ways
	fails atomic.Uint64 // connection attempts that failed
	conns atomic.Uint64 // connections established

	framesOut uint64 // guarded by mu: frames handed to the writer
	lastErr   string // guarded by mu: why the last attempt or connection failed

	logNext time.Time // owned by run: no warning before then (rate limit)
	logHeld int       // owned by run: warnings held back since the last
}

func (h *host) full() bool { return h.qfull.Load() }

// setFull records whether out is at its bound (h.mu held); the atomic is
// written only when that changes.
func (h *host) setFull(full bool) {
	if full != h.qfullL {
		h.qfullL = full
		h.qfull.Store(full)
	}
}

// enqueue copies a frame into the outbound buffer and queues its INITs,
// waiting while the buffer is full, and wakes the writer if it waits. It
// returns false (frame not queued) when the host is down.
func (h *host) enqueue(frame []byte, inits []initRec) bool {
	c := h.c
	h.mu.Lock()
	for h.upL && len(h.out)+len(frame) > c.cfg.QueueBytes && len(h.out) > 0 && !c.closed.Load() {
		h.waiters++
		h.cond.Wait()
		h.waiters--
	}
	if !h.upL || c.closed.Load() {
		h.mu.Unlock()
		return false
	}
	h.inits = append(h.inits, inits...)
	h.out = append(h.out, frame...)
	h.framesOut++
	h.setFull(len(h.out) >= c.cfg.QueueBytes)
	wake := h.writerIdle
	h.writerIdle = false
	ch := h.wake
	h.mu.Unlock()
	if wake {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return true
}

// register puts the INITs the writer took into the pending table, before
// their frames are written; it reports false, having failed them, when
// the connection of generation gen was lost meanwhile (lose took the
// table without them).
func (h *host) register(gen uint64, inits []initRec) bool {
	h.pendMu.Lock()
	if h.genP != gen {
		h.pendMu.Unlock()
		reason := ackcore.ReasonLost
		if h.c.closed.Load() {
			reason = ackcore.ReasonStopped
		}
		h.c.fail(inits, reason, &h.cnt, false)
		return false
	}
	t := &h.pend
	t.reserve(len(inits))
	if len(inits) > 1 {
		var x uint64
		for i := range inits {
			x += t.touch(inits[i].root)
		}
		t.sink = x
	}
	full := inits[:0:0]
	for _, r := range inits {
		// The same root id INITed again before its earlier outcome came
		// back (a replay reusing ids) counts once more: the server sends
		// one outcome per INIT, and so does the client.
		if !t.add(r.root, uint64(r.task)|uint64(r.ms)<<pendMsShift) {
			full = append(full, r)
		}
	}
	h.pendMu.Unlock()
	// A root INITed pendMaxCount times over without an outcome: the frame
	// carries this INIT, but the client cannot track it.
	h.c.fail(full, ackcore.ReasonFull, &h.cnt, false)
	return true
}

// hangUp sends a goodbye and closes the current connection (Stop).
func (h *host) hangUp() {
	h.mu.Lock()
	conn := h.conn
	h.cond.Broadcast()
	h.mu.Unlock()
	if conn != nil {
		_ = conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = conn.Write(appendClose(nil, closeNormal, "client stopping"))
		conn.Close()
	}
}

// lose marks the host down and fails every root pending on it: with
// ReasonLost, or ReasonStopped when the client is stopping. Its roots
// are those queued and not yet taken by the writer, and those in the
// pending table; the writer fails those it took and had not registered
// (register sees the table's generation gone).
func (h *host) lose(gen uint64) {
	c := h.c
	h.mu.Lock()
	if h.gen != gen {
		h.mu.Unlock()
		return
	}
	h.upL = false
	h.up.Store(false)
	h.gen++
	h.conn = nil
	queued := h.inits
	h.inits = nil
	h.out = h.out[:0]
	h.setFull(false)
	h.cond.Broadcast()
	h.mu.Unlock()
	h.pendMu.Lock()
	pend := h.pend
	h.pend = pendTable{}
	h.genP = 0
	h.pendMu.Unlock()
	c.setLive()
	reason := ackcore.ReasonLost
	if c.closed.Load() {
		reason = ackcore.ReasonStopped
	}
	now := time.Since(c.epoch)
	outs := make([]ackcore.Outcome, 0, pend.n+len(queued))
	pend.each(func(root, v uint64) {
		lat := now - time.Duration(v>>pendMsShift)*time.Millisecond
		for range pendCount(v) {
			outs = append(outs, ackcore.Outcome{Root: root, Task: uint32(v & pendTaskMask), Kind: ackcore.Failed, Reason: reason, Latency: lat})
		}
	})
	for _, r := range queued {
		outs = append(outs, ackcore.Outcome{Root: r.root, Task: r.task, Kind: ackcore.Failed, Reason: reason})
	}
	if len(outs) > 0 {
		c.log.Info("netio: failed the roots pending on a lost host", "host", h.addr, "roots", len(outs), "reason", reason.String())
		c.deliver(outs, &h.cnt)
	}
}
