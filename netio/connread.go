package netio

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/xorack/xorack/acker"
)

// A server connection's reader side: frames read and handed to the
// acker, one publish per read batch; backpressure (MaxConnPending) and
// the fair share applied to INITs (share.go); a held reader's look at its
// peer.

// readLoop reads frames and hands messages to the acker, flushing the
// producer whenever the read buffer is empty (before the next read may
// block): one publish per shard per read batch.
func (c *sconn) readLoop() error {
	s := c.s
	p := s.ak.Sender(c.slot)
	ap := p.(*acker.Producer) // always: Room and Staged are the concrete producer's
	idle := s.cfg.IdleTimeout
	maxPend := int64(s.cfg.MaxConnPending)
	var lastDeadline time.Time
	// read counts the messages handed to the acker since the last
	// flush: the server's shared counter is added to once per read batch.
	// taken counts the INITs taken since then, added to pending (which
	// the writer lowers) once per read batch too, against base, pending
	// as it was then: the writer only lowers it, so base+taken never
	// understates it, and only when base+taken would pass the bound does
	// the reader look at pending itself. Per frame, the counter's line
	// would bounce between the reader's and the writer's cores.
	var read, frames, bytes uint64
	// hbase is held as it was then, which the router only lowers: against
	// the allocation (share.go), as base against MaxConnPending.
	var base, hbase, taken int64
	defer func() {
		s.msgs.Add(read)
		s.framesIn.Add(frames)
		s.bytesIn.Add(bytes)
		c.pending.Add(taken)
		c.held.Add(taken)
	}()
	for {
		if !c.fr.Ready() {
			if taken > 0 {
				c.pending.Add(taken)
				c.held.Add(taken)
				taken = 0
			}
			c.giveBack()
			base, hbase = c.pending.Load(), c.held.Load()
			if err := p.Flush(); err != nil {
				return err
			}
			if read > 0 {
				s.msgs.Add(read)
				read = 0
			}
			if frames > 0 {
				s.framesIn.Add(frames)
				s.bytesIn.Add(bytes)
				frames, bytes = 0, 0
			}
			// Setting a deadline costs a timer update: do it once per
			// tenth of the idle timeout, not per read.
			if now := time.Now(); now.Sub(lastDeadline) > idle/10 {
				_ = c.raw.SetReadDeadline(now.Add(idle))
				lastDeadline = now
			}
		}
		if c.short.Load() {
			return io.EOF // closing for cause: the writer said why
		}
		// After the deadline was moved: a Shutdown or a replacing
		// connection that set it to now before is seen here.
		if c.stopped.Load() {
			return nil
		}
		if c.replaced.Load() {
			return c.errReplaced()
		}
		f, err := c.fr.Next()
		if err != nil {
			if c.stopped.Load() {
				return nil
			}
			if c.replaced.Load() {
				return c.errReplaced()
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return &closeError{code: closeIdle, err: fmt.Errorf("netio: nothing received for %v (idle timeout)", idle)}
			}
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return io.EOF
			}
			return c.protocolError(err)
		}
		frames++
		bytes += uint64(headerSize + len(f.Body))
		switch f.Type {
		case typeMsgs:
			// The frame is decoded straight into the acker's ring when
			// it has room for the whole of it in one span (Room), and
			// staged there as it is when nothing in it needs a second
			// look (no RESET to charge, no bound near): no check and copy
			// by SendBatch. Otherwise into c.msgs, which SendBatch takes
			// once the share and the RESET budget have trimmed it.
			dst := c.msgs[:0]
			direct := false
			if len(f.Body)%msgSize == 0 {
				span, err := ap.Room(len(f.Body) / msgSize)
				if err != nil {
					return err
				}
				if span != nil {
					// No span (a wrap, a receiver held back): c.msgs,
					// not a nil slice decodeMsgs would allocate for.
					dst, direct = span[:0], true
				}
			}
			msgs, n, resets, err := decodeMsgs(dst, f.Body, c.owns, s.maxToMs)
			if err != nil {
				return c.protocolError(err)
			}
			inits := int64(n)
			nearBound := inits > 0 && (base+taken+inits > maxPend || hbase+taken+inits > c.alloc.Load())
			if direct {
				if resets == 0 && !nearBound {
					ap.Staged(len(msgs))
					taken += inits
					read += uint64(len(msgs))
					break
				}
				msgs = append(c.msgs[:0], msgs...)
			}
			c.msgs = msgs
			if resets > 0 {
				c.chargeResets(resets)
			}
			if nearBound {
				// Maybe at a bound: count exactly.
				c.pending.Add(taken)
				c.held.Add(taken)
				taken = 0
				for c.pending.Load()+inits > maxPend && c.pending.Load() > 0 {
					// Backpressure: the client is not taking its
					// outcomes. Publish what is staged, then wait for
					// the writer to drain. The flag is set before the
					// re-check and the writer reads it after lowering
					// pending (both sequentially consistent), so a
					// wake-up is never lost, and the writer signals
					// only while a reader waits.
					if err := p.Flush(); err != nil {
						return err
					}
					c.roomWait.Store(true)
					if c.pending.Load()+inits > maxPend && c.pending.Load() > 0 {
						if err := c.awaitRoom(); err != nil {
							c.roomWait.Store(false)
							return c.applyLast(p, err)
						}
					}
					c.roomWait.Store(false)
					if c.stopped.Load() {
						return c.applyLast(p, nil)
					}
					if c.replaced.Load() {
						return c.applyLast(p, c.errReplaced())
					}
				}
				// Fair share: the INITs past the allocation and
				// what the pool can add are answered Failed{full}
				// here and never reach the acker.
				inits = c.admitInits(inits)
				base, hbase = c.pending.Load(), c.held.Load()
			}
			taken += inits
			if err := p.SendBatch(c.msgs); err != nil {
				return err
			}
			read += uint64(len(c.msgs))
		case typeHeartbeat:
		case typeClose:
			code, reason, err := decodeClose(f.Body)
			if err != nil {
				return c.protocolError(err)
			}
			s.log.Info("netio: client said goodbye", "remote", c.tag, "client", clientID(c.id), "code", code, "reason", reason)
			return nil
		default:
			return c.protocolError(fmt.Errorf("netio: unexpected %s frame from a client", typeName(f.Type)))
		}
	}
}

// applyLast hands the frame the reader parsed and was holding back for
// room to the acker all the same (its ACKs may complete other
// connections' roots; its INITs' outcomes go where their task's owner
// is), as the reader ends with err: a frame the server parsed is applied.
func (c *sconn) applyLast(p acker.Sender, err error) error {
	if e := p.SendBatch(c.msgs); e != nil {
		return e
	}
	c.s.msgs.Add(uint64(len(c.msgs)))
	return err
}

// awaitRoom waits until the writer signals room (nil), the writer exits
// or the peer is seen gone (io.EOF), or the reader is stopped or replaced
// (nil: the caller looks). A reader held by backpressure reads nothing,
// so it would not see its peer's EOF; it looks at the socket instead,
// every peerCheckInterval.
func (c *sconn) awaitRoom() error {
	t := time.NewTimer(peerCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-c.room:
			return nil
		case <-c.done:
			return io.EOF
		case <-t.C:
			if c.stopped.Load() || c.replaced.Load() {
				return nil
			}
			if peerGone(c.raw) {
				c.s.log.Info("netio: client gone while held by backpressure", "remote", c.tag, "client", clientID(c.id))
				return io.EOF
			}
			t.Reset(peerCheckInterval)
		}
	}
}

// owns reports whether c owns spout task t now (reader side).
func (c *sconn) owns(t uint32) bool {
	return t < uint32(len(c.s.owner)) && c.s.owner[t].Load() == c
}

func (c *sconn) protocolError(err error) error {
	c.s.protoErrs.Add(1)
	return &closeError{code: closeProtocol, err: err}
}
