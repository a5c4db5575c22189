package netio

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// sconn is one server connection. The reader goroutine (serve) owns fr,
// msgs and the acker producer; the router owns rbuf; mu guards out and
// the fields marked so; the writer goroutine owns spare.
type sconn struct {
	s        *Server
	raw      net.Conn  // immutable: deadlines and Close from any goroutine
	nc       net.Conn  // raw, or TLS over it: reads by the reader, writes by the writer
	slot     int       // the acker producer; -1 until claim (under s.mu) takes one
	accepted time.Time // immutable: when the server accepted it

	preElem *list.Element // guarded by s.mu: c in s.pre, nil once authenticated or dropped
	dropped bool          // guarded by s.mu: dropped from the handshake budget
	owner   bool          // guarded by s.mu: counted in s.owners
	// orphansBase is the slot's orphan refusals (acker.OrphansRefused)
	// when c took it: the slot's earlier connections' (set by claim).
	orphansBase uint64

	resets  charges           // reader's: this connection's RESETs within MaxRootTimeout
	refused []ackcore.Outcome // reader's: the Failed{full} of INITs past the share
	// Counted per connection (Server.Conns): INITs refused past the
	// share, RESETs dropped past the RESET share.
	initsRefused, resetsDropped atomic.Uint64
	replaced                    atomic.Bool  // a newer connection of the same client took the tasks over
	short                       atomic.Bool  // closing for cause: the close frame's deadline is set, the writer leaves it
	refs                        atomic.Int32 // reader and writer still running; the last frees the slot
	id                          uint64       // client id, set by the handshake
	tag                         string       // for logs
	fr                          *frameReader
	msgs                        []ackcore.Msg

	tasks []taskRange
	limit int // the client's max frame

	rbuf []ackcore.Outcome // router's batch for this connection

	pending atomic.Int64 // roots whose INIT was read and whose outcome was not yet written
	// held is the roots whose INIT the reader handed to the acker and
	// whose outcome the router has not routed to c yet: raised by the
	// reader (per read batch, as pending), lowered by the router (per
	// batch). Its allocation binds it: it is what c holds in the acker.
	held atomic.Int64
	// alloc is the room of the table c is allocated (share.go): written
	// by its reader only, read by Conns.
	alloc     atomic.Int64
	drawAfter time.Time     // reader's: no draw past the base share before then (share.go)
	room      chan struct{} // reader waits here while pending is at the bound
	roomWait  atomic.Bool   // the reader waits (or is about to) on room

	mu         sync.Mutex
	out        []byte // guarded by mu: frames to write
	nout       int    // guarded by mu: outcomes in out
	closeMsg   []byte // guarded by mu: a close frame to write last
	finished   bool   // guarded by mu: no more frames; the writer writes out and closes
	writerIdle bool   // guarded by mu: the writer waits on wake
	wake       chan struct{}
	done       chan struct{} // closed when the writer has exited
	spare      []byte
	stopped    atomic.Bool // reading stopped by Shutdown
}

// ConnStats describes one authenticated connection (Server.Conns).
type ConnStats struct {
	Remote   string
	ClientID uint64
	// Pending is the roots whose INIT the server took and whose outcome
	// it has not written yet; Held those of them in the acker (outcome
	// not yet routed to the connection), which its allocation binds;
	// Alloc the room of the table it is allocated (see Server.Share).
	Pending, Held, Alloc int64
	// InitsRefused counts the INITs answered Failed{full} past the
	// connection's share; ResetsDropped the RESETs dropped past its RESET
	// share.
	InitsRefused, ResetsDropped uint64
	// OrphansRefused counts its ACKs, FAILs and RESETs for unknown roots
	// the acker refused at its orphan share (Server.OrphanShare), as of
	// the shards' last tick.
	OrphansRefused uint64
}

// Conns returns the authenticated connections' counters, in no order.
func (s *Server) Conns() []ConnStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cs []ConnStats
	for c := range s.conns {
		if c.slot < 0 {
			continue // in the handshake, or never through it
		}
		cs = append(cs, ConnStats{Remote: c.tag, ClientID: c.id, Pending: c.pending.Load(), Held: c.held.Load(), Alloc: c.alloc.Load(),
			InitsRefused: c.initsRefused.Load(), ResetsDropped: c.resetsDropped.Load(),
			OrphansRefused: s.ak.OrphansRefused(c.slot) - c.orphansBase})
	}
	return cs
}

// replace stops c's reader: a newer connection of the same client owns
// its tasks now (under s.mu).
func (c *sconn) replace() { c.interruptReader(&c.replaced) }

// errReplaced is the error a replaced connection's reader ends with.
func (c *sconn) errReplaced() error {
	return &closeError{code: closeReplaced, err: fmt.Errorf("netio: replaced by a newer connection of client %#x", c.id)}
}

func (c *sconn) stopReading() { c.interruptReader(&c.stopped) }

// interruptReader sets flag and wakes the reader from its read or its
// wait for room; it looks at the flag then.
func (c *sconn) interruptReader(flag *atomic.Bool) {
	flag.Store(true)
	_ = c.raw.SetReadDeadline(time.Now())
	select {
	case c.room <- struct{}{}:
	default:
	}
}

// serve runs the handshake and then the reader loop.
func (c *sconn) serve() {
	s := c.s
	c.tag = c.raw.RemoteAddr().String()
	defer s.readers.Done()
	authed := false
	defer func() {
		if !authed {
			c.raw.Close()
			c.refs.Add(-1) // no writer
		}
		c.unref()
	}()
	if err := c.handshake(); err != nil {
		s.hsFails.Add(1)
		s.mu.Lock()
		if c.preElem != nil {
			s.pre.Remove(c.preElem)
			c.preElem = nil
		}
		dropped := c.dropped
		s.mu.Unlock()
		if dropped {
			// Its read woke with a deadline error because it was
			// dropped: that, not a timeout, is why.
			err = &closeError{code: closeOverloaded, err: fmt.Errorf("netio: dropped in the handshake for a newer connection (MaxHandshakes %d), %v after it connected",
				s.cfg.MaxHandshakes, time.Since(c.accepted).Round(time.Millisecond))}
		}
		s.hsCause[hsCauseOf(err)].Add(1)
		s.log.Warn("netio: handshake failed", "remote", c.tag, "reason", err.Error())
		if code := codeOf(err); code != closeNormal {
			c.reject(code, reasonOf(err))
		}
		return
	}
	authed = true
	s.writers.Add(1)
	go c.writer()
	err := c.readLoop()
	p := s.ak.Sender(c.slot)
	ferr := p.Flush()
	switch {
	case c.stopped.Load():
		// Shutdown: keep the tasks until the final outcomes are written.
		return
	case err == nil || errors.Is(err, io.EOF):
		s.log.Info("netio: client closed", "remote", c.tag, "client", clientID(c.id),
			"inits_refused", c.initsRefused.Load(), "resets_dropped", c.resetsDropped.Load())
	default:
		s.log.Warn("netio: connection closed", "remote", c.tag, "client", clientID(c.id), "reason", err.Error(),
			"inits_refused", c.initsRefused.Load(), "resets_dropped", c.resetsDropped.Load())
	}
	_ = ferr
	c.release()
	c.finish(codeOf(err), reasonOf(err))
	if c.short.Load() {
		c.linger()
	}
}

// unref drops one of c's goroutines; the last one out forgets c.
func (c *sconn) unref() {
	if c.refs.Add(-1) == 0 {
		c.s.forget(c)
	}
}

// forget removes c from the server and frees its producer slot: its
// reader has flushed and will not touch the producer again.
func (s *Server) forget(c *sconn) {
	s.mu.Lock()
	delete(s.conns, c)
	if c.slot >= 0 {
		s.authed.Add(-1)
		s.setOrphanShare()
	}
	if c.owner {
		s.addOwners(-1)
	}
	s.releaseShare(c)
	s.mu.Unlock()
	s.open.Add(-1)
	c.raw.Close() // closed already, or left open by a lingering close
	if c.slot >= 0 {
		s.slots <- c.slot
	}
}

// readLoop reads frames and hands messages to the acker, flushing the
// producer whenever the read buffer is empty (before the next read may
// block): one publish per shard per read batch.
func (c *sconn) readLoop() error {
	s := c.s
	p := s.ak.Sender(c.slot)
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
			var n, resets int
			c.msgs, n, resets, err = decodeMsgs(c.msgs[:0], f.Body, c.owns, s.maxToMs)
			if err != nil {
				return c.protocolError(err)
			}
			if resets > 0 {
				c.chargeResets(resets)
			}
			inits := int64(n)
			if inits > 0 && (base+taken+inits > maxPend || hbase+taken+inits > c.alloc.Load()) {
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
		if len(c.out) > 0 && len(c.out) < coalesceBytes && !c.finished && yielded < coalesceYields {
			// Little to write: let the router add to it first (see
			// coalesceBytes).
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
