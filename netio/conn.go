package netio

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// A server connection's life: its state (sconn), its counters
// (Server.Conns), interrupting its reader (replaced, stopped), serve (the
// handshake, then the reader and the writer) and forgetting it once both
// are out. Its reader is in connread.go, its writer in connwrite.go.

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
