package netio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"time"

	"github.com/xorack/xorack/ackcore"
)

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
		bytes += uint64(headerSize + len(f.Body))
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
	n := len(body) / outcomeSize
	stale := 0
	var err error
	h.pendMu.Lock()
	if n > 1 {
		var x uint64
		for i := range n {
			x += h.pend.touch(binary.LittleEndian.Uint64(body[i*outcomeSize+offOutRoot:]))
		}
		h.pend.sink = x
	}
	for i := range n {
		r := body[i*outcomeSize:]
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
	yielded := 0 // yields since the last write
	for {
		h.mu.Lock()
		if h.gen != gen {
			h.mu.Unlock()
			return
		}
		var buf []byte
		var inits []initRec
		if len(h.out) > 0 && len(h.out) < coalesceBytes && yielded < coalesceYields {
			// Little to write: let the senders add to it first (see
			// coalesceBytes).
			yielded++
			h.mu.Unlock()
			runtime.Gosched()
			continue
		}
		yielded = 0
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
