package netio

import (
	"errors"
	"net"
	"runtime"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// A server connection's writer side: the router's outcomes encoded into
// the outbound buffer (bounded: a client that does not take them is
// closed as slow), the close frame queued last, and the writer goroutine
// that writes them, coalesced, with heartbeats when idle.

// queueOutcomes encodes outs into c's outbound buffer (router side).
func (c *sconn) queueOutcomes(outs []ackcore.Outcome) {
	per := maxMsgsPerFrame(c.limit)
	need := len(outs)*outcomeSize + headerSize*((len(outs)+per-1)/per)
	bound := c.s.outBound(c.limit)
	c.mu.Lock()
	if c.finished {
		c.mu.Unlock()
		return
	}
	over := len(c.out)+need > bound
	if !over && cap(c.out)-len(c.out) < need {
		// Grow it here, to at most the bound, so that the buffer's
		// capacity (the memory it holds) never passes it: appendOutcomes
		// alone would double it.
		nb := make([]byte, len(c.out), min(max(2*cap(c.out), len(c.out)+need), bound))
		copy(nb, c.out)
		c.out = nb
	}
	frames := 0
	for !over && len(outs) > 0 {
		n := min(len(outs), per)
		c.out = appendOutcomes(c.out, outs[:n])
		c.nout += n
		outs = outs[n:]
		frames++
	}
	if over {
		// More outcomes than the roots it may have pending (tasks taken
		// over from an earlier connection): it is not reading. Cut it
		// loose rather than hold them: drop them (its client fails them
		// as lost when the connection ends) and say why.
		c.out, c.nout = c.out[:0], 0
		c.finished = true
		c.closeMsg = appendClose(nil, closeSlow, "netio: client not taking its outcomes")
		c.short.Store(true)
	}
	wake := c.writerIdle || over
	c.writerIdle = false
	c.mu.Unlock()
	c.s.framesOut.Add(uint64(frames))
	if over {
		c.s.slow.Add(1)
		c.s.log.Warn("netio: client not taking its outcomes", "remote", c.tag, "client", clientID(c.id))
		_ = c.raw.SetWriteDeadline(time.Now().Add(closeWriteTimeout)) // a write in progress ends soon
	}
	if wake {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// finish queues a close frame after everything queued; the writer then
// writes out and closes the connection. A close for cause (replaced,
// slow, overloaded) is written within closeWriteTimeout, best effort.
func (c *sconn) finish(code uint16, reason string) {
	c.mu.Lock()
	if !c.finished {
		c.finished = true
		c.closeMsg = appendClose(nil, code, reason)
		if code == closeReplaced || code == closeSlow || code == closeOverloaded {
			c.short.Store(true)
			_ = c.raw.SetWriteDeadline(time.Now().Add(closeWriteTimeout))
		}
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// writer writes c's outbound frames, one write per swap of the outbound
// buffer (everything the router queued since the last), a heartbeat
// when idle, and the close frame last; then it closes the connection and
// frees its slot. The write deadline moves once per tenth of
// WriteTimeout, not per write.
func (c *sconn) writer() {
	s := c.s
	defer s.writers.Done()
	defer func() {
		close(c.done)
		if tc, ok := c.raw.(*net.TCPConn); ok && c.short.Load() {
			// A close for cause: end our side after the close frame and
			// leave the socket open a little for the reader to drain
			// (see linger), as closing it with unread bytes in it would
			// reset the connection, and the client would lose the close
			// frame with the rest of its receive buffer.
			_ = tc.CloseWrite()
			_ = c.raw.SetReadDeadline(time.Now().Add(closeWriteTimeout))
		} else {
			c.raw.Close()
		}
		c.unref()
	}()
	hb := s.cfg.IdleTimeout / 3
	wt := s.cfg.WriteTimeout
	t := time.NewTimer(hb)
	defer t.Stop()
	var lastDeadline time.Time
	yielded := 0 // yields since the last write
	for {
		c.mu.Lock()
		if len(c.out) > 0 && len(c.out) < coalesceBytes && !c.finished && yielded < outcomeYields {
			// Little to write: let the router add to it first (see
			// coalesceBytes and outcomeYields).
			yielded++
			c.mu.Unlock()
			runtime.Gosched()
			continue
		}
		yielded = 0
		if len(c.out) == 0 && !c.finished {
			c.writerIdle = true
			c.mu.Unlock()
			t.Reset(hb) // go1.23+: Reset drains a fired timer
			beat := false
			select {
			case <-c.wake:
			case <-t.C:
				beat = true
			}
			c.mu.Lock()
			c.writerIdle = false
			if len(c.out) == 0 && !c.finished {
				c.mu.Unlock()
				if beat {
					hb := appendHeartbeat(c.spare[:0])
					if w, err := c.write(hb, &lastDeadline, wt); err != nil {
						c.closeAfterTimeout(hb, w, err, false, nil)
						return
					}
				}
				continue
			}
			if !c.finished && len(c.out) < coalesceBytes {
				yielded++
				c.mu.Unlock()
				runtime.Gosched()
				continue
			}
		}
		buf := c.out
		c.out = c.spare[:0]
		n := c.nout
		c.nout = 0
		fin := c.finished
		closeMsg := c.closeMsg
		c.mu.Unlock()
		if fin {
			buf = append(buf, closeMsg...)
		}
		w, err := c.write(buf, &lastDeadline, wt)
		if err != nil {
			c.closeAfterTimeout(buf, w, err, fin, closeMsg)
		}
		c.spare = buf[:0]
		if n > 0 {
			// Outcomes written: room for more INITs.
			c.pending.Add(-int64(n))
			if c.roomWait.Load() {
				select {
				case c.room <- struct{}{}:
				default:
				}
			}
		}
		if err != nil || fin {
			return
		}
	}
}

// write writes buf (the writer's), moving the write deadline when it is
// older than a tenth of wt (unless a close for cause set it); on an error
// it logs a stalled client and marks c finished. It returns the bytes
// written.
func (c *sconn) write(buf []byte, lastDeadline *time.Time, wt time.Duration) (int, error) {
	s := c.s
	if len(buf) == 0 {
		return 0, nil
	}
	if now := time.Now(); now.Sub(*lastDeadline) > wt/10 && !c.short.Load() {
		_ = c.raw.SetWriteDeadline(now.Add(wt))
		*lastDeadline = now
	}
	n, err := c.nc.Write(buf)
	s.bytesOut.Add(uint64(n))
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && !c.short.Load() {
			s.slow.Add(1)
			s.log.Warn("netio: client not reading; closing", "remote", c.tag, "client", clientID(c.id), "write_timeout", wt)
		}
		c.mu.Lock()
		c.finished = true
		c.mu.Unlock()
	}
	return n, err
}
