package netio

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
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

// run is the host's connection manager: connect, serve until the
// connection ends, fail what was pending, back off, again, until Stop.
func (h *host) run(first chan<- error) {
	c := h.c
	defer c.wg.Done()
	backoff := c.cfg.BackoffMin
	reported := false
	dialed := time.Now()
	for !c.closed.Load() {
		conn, fr, w, err := h.connect()
		if err != nil {
			h.fails.Add(1)
			h.setLastErr("cannot connect: " + err.Error())
			if !reported && busy(err) && time.Since(dialed) < c.cfg.DialTimeout {
				// The server was busy (at MaxConns, or it dropped this
				// handshake for a newer one), or a task is still owned
				// by a connection it has not yet seen close: Dial tries
				// again within its dial timeout rather than fail at once.
				select {
				case <-time.After(c.cfg.BackoffMin):
				case <-c.stopped:
					return
				}
				continue
			}
			if !reported {
				first <- &HostError{Addr: h.addr, Err: err}
				reported = true
			}
			h.warn("netio: cannot connect", "reason", err.Error(), "retry_in", backoff)
			// Jitter in [backoff/2, backoff): clients that lost a host
			// together do not come back together.
			d := backoff/2 + time.Duration(rand.Int64N(int64(backoff/2)+1))
			select {
			case <-time.After(d):
			case <-c.stopped:
				return
			}
			backoff = min(2*backoff, c.cfg.BackoffMax)
			continue
		}
		c.conns.Add(1)
		h.conns.Add(1)
		since := time.Now()
		reason := h.serve(conn, fr, w, func() {
			// Dial returns once the host is routable, not merely
			// connected: a Send right after it must find it up.
			if !reported {
				first <- nil
				reported = true
			}
		})
		if time.Since(since) > c.cfg.BackoffMax {
			backoff = c.cfg.BackoffMin
		}
		if !c.closed.Load() {
			h.setLastErr("lost: " + reason)
			h.warn("netio: host lost", "reason", reason)
		}
	}
}

// warn logs a warning about the host, at most once per c.logEvery (the
// default logger); the next one logged counts those held back. Called by
// run only, which owns logNext and logHeld.
func (h *host) warn(msg string, args ...any) {
	c := h.c
	if c.logEvery > 0 {
		now := time.Now()
		if now.Before(h.logNext) {
			h.logHeld++
			return
		}
		h.logNext = now.Add(c.logEvery)
		if h.logHeld > 0 {
			args = append(args, "held_back", h.logHeld)
			h.logHeld = 0
		}
	}
	c.log.Warn(msg, append([]any{"host", h.addr}, args...)...)
}

// connect dials and handshakes.
func (h *host) connect() (net.Conn, *frameReader, welcomeBody, error) {
	c := h.c
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.DialTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	d := net.Dialer{}
	conn, err := d.DialContext(ctx, "tcp", h.addr)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			err = oe.Err // "connect: connection refused"; the address is the HostError's
		}
		return nil, nil, welcomeBody{}, err
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	fail := func(err error) (net.Conn, *frameReader, welcomeBody, error) {
		conn.Close()
		return nil, nil, welcomeBody{}, err
	}
	nc := conn
	if c.cfg.TLS != nil {
		tc := c.cfg.TLS.Clone()
		if tc.ServerName == "" {
			host, _, _ := net.SplitHostPort(h.addr)
			tc.ServerName = host
		}
		t := tls.Client(conn, tc)
		if err := t.HandshakeContext(ctx); err != nil {
			return fail(fmt.Errorf("TLS handshake: %w", err))
		}
		nc = t
	}
	fr := newFrameReader(nc, handshakeMaxFrame)
	f, err := handshakeFrame(fr, typeChallenge, "challenge", "connection refused")
	if err != nil {
		return fail(err)
	}
	ch, err := decodeChallenge(f.Body)
	if err != nil {
		return fail(unprefixed(err))
	}
	if uint64(c.cfg.TaskBase)+uint64(c.spec.Tasks) > uint64(ch.Tasks) {
		return fail(fmt.Errorf("serves tasks [0, %d), this client owns [%d, %d)", ch.Tasks,
			c.cfg.TaskBase, uint64(c.cfg.TaskBase)+uint64(c.spec.Tasks)))
	}
	if need := HeaderSize + c.frame*MsgSize; need > int(ch.MaxFrame) {
		return fail(fmt.Errorf("accepts frames of %d bytes, FrameMsgs %d needs %d", ch.MaxFrame, c.frame, need))
	}
	hello := helloBody{ClientID: c.cfg.ID, MaxFrame: uint32(c.cfg.MaxFrame),
		Tasks: []taskRange{{First: c.cfg.TaskBase, Count: uint32(c.spec.Tasks)}}}
	hello.MAC = helloMAC(c.cfg.Secret, &ch.Nonce, &hello)
	if _, err := nc.Write(appendHello(nil, &hello)); err != nil {
		return fail(fmt.Errorf("writing hello: %w", err))
	}
	if f, err = handshakeFrame(fr, typeWelcome, "welcome", "handshake refused"); err != nil {
		return fail(err)
	}
	w, err := decodeWelcome(f.Body)
	if err != nil {
		return fail(unprefixed(err))
	}
	_ = conn.SetDeadline(time.Time{})
	fr.SetLimit(c.cfg.MaxFrame)
	if t, ok := nc.(*tls.Conn); ok {
		return t, fr, w, nil
	}
	return conn, fr, w, nil
}

// unprefixed drops the "netio: " of an error that goes into a HostError,
// itself inside a ConnectError that says "netio: " once.
func unprefixed(err error) error {
	if s, ok := strings.CutPrefix(err.Error(), "netio: "); ok {
		return &prefixless{s, err}
	}
	return err
}

type prefixless struct {
	s   string
	err error
}

func (p *prefixless) Error() string { return p.s }
func (p *prefixless) Unwrap() error { return p.err }

// serve runs one connection: the writer on its own goroutine, the reader
// here; when either ends, the host is down and its pending roots fail.
func (h *host) serve(conn net.Conn, fr *frameReader, w welcomeBody, up func()) string {
	c := h.c
	wake := make(chan struct{}, 1)
	h.mu.Lock()
	h.gen++
	gen := h.gen
	h.upL = true
	h.wake = wake
	h.conn = conn
	h.writerIdle = false
	if c.closed.Load() {
		conn.Close() // Stop's hangUp ran before this connection was known
	}
	h.mu.Unlock()
	h.pendMu.Lock()
	h.genP = gen
	h.pendMu.Unlock()
	h.up.Store(true)
	c.setLive()
	up()
	c.log.Info("netio: connected", "host", h.addr, "server", w.ServerID)
	wdone, rdone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(wdone)
		h.writer(conn, gen, wake, rdone, w.Heartbeat)
	}()
	reason := h.read(conn, fr, w.Idle)
	conn.Close()
	close(rdone) // an idle writer would otherwise wait for its next heartbeat
	<-wdone
	h.lose(gen)
	return reason
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

// deliverAt is the most outcomes the reader resolves before it delivers
// them, even with more frames buffered.
const deliverAt = 4096

// read reads outcomes until the connection fails; it returns why. It
// resolves each outcomes frame against the pending table as it parses
// it, and delivers what it resolved when the next frame is not wholly
// buffered (before a read may block), at deliverAt outcomes, and when it
// returns: a root taken out of the table is always delivered.
func (h *host) read(conn net.Conn, fr *frameReader, idle time.Duration) string {
	outs := make([]ackcore.Outcome, 0, deliverAt)
	defer func() {
		if len(outs) > 0 {
			h.c.deliver(outs, &h.cnt)
		}
	}()
	var lastDeadline time.Time
	// frames and bytes are published to h.io once per read batch.
	var frames, bytes uint64
	defer func() { h.io.framesIn.Add(frames); h.io.bytesIn.Add(bytes) }()
	for {
		if !fr.Ready() {
			if len(outs) > 0 {
				h.c.deliver(outs, &h.cnt)
				outs = outs[:0]
			}
			if frames > 0 {
				h.io.framesIn.Add(frames)
				h.io.bytesIn.Add(bytes)
				frames, bytes = 0, 0
			}
			if now := time.Now(); now.Sub(lastDeadline) > idle/10 {
				_ = conn.SetReadDeadline(now.Add(idle))
				lastDeadline = now
			}
		}
		f, err := fr.Next()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fmt.Sprintf("nothing received for %v (idle timeout)", idle)
			}
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return "connection closed"
			}
			return err.Error()
		}
		frames++
		bytes += uint64(HeaderSize + len(f.Body))
		switch f.Type {
		case typeOutcomes:
			if outs, err = h.resolve(outs, f.Body); err != nil {
				return err.Error()
			}
			if len(outs) >= deliverAt {
				h.c.deliver(outs, &h.cnt)
				outs = outs[:0]
			}
		case typeHeartbeat:
		case typeClose:
			code, reason, err := decodeClose(f.Body)
			if err != nil {
				return err.Error()
			}
			return fmt.Sprintf("server closed the connection (code %d): %s", code, reason)
		default:
			return fmt.Sprintf("unexpected %s frame from the server", typeName(f.Type))
		}
	}
}

// resolve parses an outcomes frame's body and matches each outcome with
// its pending root, under one lock: the root's entry gives the outcome
// its local task and loses one INIT; the outcome is appended to outs. An
// outcome for a root not pending here (failed already as lost, or never
// sent by this client) is counted stale and dropped. A malformed record
// ends the parse with an error naming it; the outcomes before it stay
// resolved, in outs.
func (h *host) resolve(outs []ackcore.Outcome, body []byte) ([]ackcore.Outcome, error) {
	n := len(body) / OutcomeSize
	stale := 0
	var err error
	h.pendMu.Lock()
	if n > 1 {
		var x uint64
		for i := range n {
			x += h.pend.touch(binary.LittleEndian.Uint64(body[i*OutcomeSize+offOutRoot:]))
		}
		h.pend.sink = x
	}
	for i := range n {
		r := body[i*OutcomeSize:]
		root, lat, _, kind, reason, ok := outcomeFields(r)
		if !ok {
			err = fmt.Errorf("netio: outcome %d of %d: %w", i, n, outcomeError(r))
			break
		}
		v, found := h.pend.take(root)
		if !found {
			stale++
			continue
		}
		if kind == ackcore.Refused {
			// The INIT was not applied: no other outcome will come.
			kind = ackcore.Failed
		}
		outs = append(outs, ackcore.Outcome{})
		o := &outs[len(outs)-1]
		o.Root, o.Latency, o.Task, o.Kind, o.Reason = root, lat, uint32(v&pendTaskMask), kind, reason
	}
	h.pendMu.Unlock()
	if stale > 0 {
		h.cnt.stale.Add(uint64(stale))
	}
	return outs, err
}

// writer writes what the senders queued, with one write per turn (a swap
// of the outbound buffer), after registering the turn's INITs, and a
// heartbeat when it has had nothing to write for a heartbeat interval; it
// ends when the connection fails, the reader ends (rdone) or the
// generation changes. The write
// deadline is moved once per tenth of WriteTimeout, not per write (a
// deadline update is a timer update).
func (h *host) writer(conn net.Conn, gen uint64, wake, rdone chan struct{}, hb time.Duration) {
	c := h.c
	t := time.NewTimer(hb)
	defer t.Stop()
	var spare []byte
	var spareInits []initRec
	var lastDeadline time.Time
	wt := c.cfg.WriteTimeout
	yielded := false
	for {
		h.mu.Lock()
		if h.gen != gen {
			h.mu.Unlock()
			return
		}
		var buf []byte
		var inits []initRec
		if len(h.out) > 0 && len(h.out) < coalesceBytes && !yielded {
			// Little to write: let the senders add to it first (see
			// coalesceBytes).
			yielded = true
			h.mu.Unlock()
			runtime.Gosched()
			continue
		}
		yielded = false
		if len(h.out) == 0 {
			h.writerIdle = true
			h.mu.Unlock()
			t.Reset(hb) // go1.23+: Reset drains a fired timer
			select {
			case <-wake:
				continue
			case <-t.C:
				buf, inits = appendHeartbeat(spare[:0]), spareInits[:0]
			case <-rdone:
				return
			case <-c.stopped:
				return
			}
		} else {
			buf, inits = h.out, h.inits
			h.out, h.inits = spare[:0], spareInits[:0]
			h.setFull(false)
			if h.waiters > 0 {
				h.cond.Broadcast()
			}
			h.mu.Unlock()
		}
		now := time.Now()
		if len(inits) > 0 {
			ms := uint32(now.Sub(c.epoch) / time.Millisecond)
			for i := range inits {
				inits[i].ms = ms
			}
			if !h.register(gen, inits) {
				return
			}
		}
		if now.Sub(lastDeadline) > wt/10 {
			_ = conn.SetWriteDeadline(now.Add(wt))
			lastDeadline = now
		}
		n, err := conn.Write(buf)
		h.io.bytesOut.Add(uint64(n))
		spare, spareInits = buf[:0], inits[:0]
		if err != nil {
			conn.Close()
			return
		}
	}
}

// handshakeFrame reads the server's next handshake frame, which must be of
// type want (named what): a close frame is the server's refusal, with its
// code and reason, said as refused ("connection refused", "handshake
// refused"); any other type is a protocol error.
func handshakeFrame(fr *frameReader, want uint8, what, refused string) (wireFrame, error) {
	f, err := fr.Next()
	if err != nil {
		return f, fmt.Errorf("reading %s: %w", what, unprefixed(err))
	}
	if f.Type == typeClose {
		code, reason, _ := decodeClose(f.Body)
		return f, &refusedError{code: code, text: fmt.Sprintf("%s (%s, code %s)", reason, refused, closeCodeName(code))}
	}
	if f.Type != want {
		return f, fmt.Errorf("sent %s, want %s", typeName(f.Type), what)
	}
	return f, nil
}
