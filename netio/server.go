package netio

import (
	"container/list"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// The server: its counters, NewServer, accepting and admitting
// connections (the handshake budget), the bound on a connection's memory,
// shutting down, and the router that takes the acker's outcomes to the
// connection owning each one's task. A connection's life is in conn.go.

// ServerStats are a server's counters.
type ServerStats struct {
	Accepted       uint64 // connections accepted
	Refused        uint64 // closed at authentication (MaxConns reached) or at once (shutting down)
	HandshakeFails uint64 // closed during the handshake (auth, protocol, timeout, task taken, dropped)
	// HandshakesDropped counts the connections closed in the handshake
	// because MaxHandshakes newer ones came (included in HandshakeFails).
	HandshakesDropped uint64
	// InitsRefused counts the INITs answered Failed{full} past their
	// connection's fair share (see Server.Share); ResetsDropped the RESETs
	// dropped past their connection's RESET share (ResetShare).
	InitsRefused, ResetsDropped uint64
	ProtocolErrors              uint64 // authenticated connections closed for a malformed frame
	SlowClosed                  uint64 // closed for not reading (write timeout or outcome bound)
	Open                        int64  // connections open now
	Msgs                        uint64 // messages handed to the acker
	Outcomes                    uint64 // outcomes queued to a connection
	Unrouted                    uint64 // outcomes whose task had no connection (dropped)
	// InHandshake is the connections in the handshake now, not yet
	// authenticated (Open counts them too).
	InHandshake int
	// Unallocated is the room of the acker's table no connection is
	// allocated: the reserve the connections draw on past their share
	// (see Server.Share).
	Unallocated int64
	// HandshakeFailures splits HandshakeFails by cause.
	HandshakeFailures HandshakeFailures
	// FramesIn and BytesIn count the frames and bytes read from
	// authenticated connections (added once per read batch); FramesOut
	// and BytesOut the outcome frames queued and the bytes written.
	FramesIn, BytesIn, FramesOut, BytesOut uint64
	Acker                                  ackcore.Stats
}

// Server serves a sharded acker.Acker over TCP (see the package doc).
type Server struct {
	cfg   ServerConfig
	ak    *acker.Acker
	id    uint64
	log   *slog.Logger
	owner []atomic.Pointer[sconn] // owner[task]: the connection that owns spout task
	slots chan int                // free producer indices

	total   int64  // Shards x MaxPending: immutable
	maxToMs uint32 // MaxRootTimeout in ms: immutable
	// The shares (share.go), immutable after NewServer: the table's room
	// for INITs (total less the shards' spread), the reserve kept off the
	// base shares, the least a connection draws from the pool at once,
	// and whether the shares are off (ShareSlack at least total).
	room, reserve, chunk int64
	sharesOff            bool
	// pool is the room no live connection is allocated (share.go): drawn
	// from and given back by the readers, given back by the router for
	// the roots of connections gone.
	pool atomic.Int64

	mu    sync.Mutex // guards lns, conns, pre, closing, ownership changes
	lns   []net.Listener
	conns map[*sconn]struct{}
	pre   *list.List // connections in the handshake, oldest first
	// authed counts the authenticated connections, owners those of them
	// that own a task (only they may INIT): written under mu, read
	// atomically by the readers for their shares.
	authed, owners atomic.Int64
	share          atomic.Int64 // Share, kept up to date with owners (under mu)
	resetMu        sync.Mutex   // guards resets
	resets         charges      // the server's RESETs within MaxRootTimeout
	closing        bool
	readers        sync.WaitGroup // connection goroutines (handshake and reader)
	routers        sync.WaitGroup
	writers        sync.WaitGroup
	accepting      sync.WaitGroup
	stopOnce       sync.Once
	final          ackcore.Stats

	accepted, refused, hsFails, protoErrs, slow atomic.Uint64
	hsDropped, initsRefused, resetsDropped      atomic.Uint64
	open                                        atomic.Int64
	// msgs is added to by the readers, outcomes and unrouted by the
	// router: on lines of their own.
	hsCause [hsCauses]atomic.Uint64 // handshake failures by cause (hsCause*)
	// msgs, framesIn and bytesIn are added to by the readers, once per
	// read batch; outcomes, unrouted and framesOut by the router;
	// bytesOut by the writers, once per write: on lines of their own.
	_                             [64]byte
	msgs, framesIn, bytesIn       atomic.Uint64
	_                             [40]byte
	outcomes, unrouted, framesOut atomic.Uint64
	_                             [40]byte
	bytesOut                      atomic.Uint64
	_                             [56]byte
}

// NewServer builds a server and starts its acker; Serve accepts
// connections.
func NewServer(cfg ServerConfig) (*Server, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	routers := 1
	ak, err := acker.New(acker.Config{
		Shards: cfg.Shards, Spec: acker.Spec{Producers: cfg.MaxConns, Tasks: cfg.Tasks, Receivers: routers}, Shard: cfg.Shard, RingSize: cfg.RingSize, Pin: cfg.Pin, Idle: cfg.Idle, MaxBytes: cfg.MaxBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("netio: %w", err)
	}
	s := &Server{cfg: cfg, ak: ak, log: cfg.Logger, owner: make([]atomic.Pointer[sconn], cfg.Tasks),
		slots: make(chan int, cfg.MaxConns), conns: map[*sconn]struct{}{}, pre: list.New(),
		total: int64(cfg.Shards) * int64(cfg.Shard.MaxPending), maxToMs: uint32(cfg.MaxRootTimeout / time.Millisecond)}
	s.resets.init(cfg.MaxRootTimeout)
	s.initShares()
	var idb [8]byte
	_, _ = rand.Read(idb[:])
	s.id = binary.LittleEndian.Uint64(idb[:])
	for i := range cfg.MaxConns {
		s.slots <- i
	}
	if err := ak.Start(); err != nil {
		return nil, fmt.Errorf("netio: %w", err)
	}
	for r := range routers {
		s.routers.Add(1)
		go s.route(ak.Inbox(r).(*acker.Receiver))
	}
	return s, nil
}

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("netio: server closed")

// Serve accepts connections on ln until Shutdown or Close, and closes ln.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.lns = append(s.lns, ln)
	s.accepting.Add(1)
	s.mu.Unlock()
	defer s.accepting.Done()
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// Out of descriptors or a transient error: back off, as
				// net/http does, instead of spinning.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("netio: accept: %w", err)
		}
		delay = 0
		s.accepted.Add(1)
		s.admit(c)
	}
}

// admit starts c's goroutine, making room in the handshake budget by
// dropping the oldest connection still handshaking, or closes c when the
// server is shutting down. The producer slot is taken when the handshake
// succeeds (claim).
func (s *Server) admit(c net.Conn) {
	sc := &sconn{s: s, raw: c, nc: c, slot: -1, accepted: time.Now(), wake: make(chan struct{}, 1), room: make(chan struct{}, 1),
		done: make(chan struct{})}
	sc.refs.Store(2) // the reader and the writer; the writer starts after the handshake
	sc.resets.init(s.cfg.MaxRootTimeout)
	var drop *sconn
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		s.refused.Add(1)
		closeWith(c, closeShutdown, "netio: server shutting down")
		return
	}
	if s.pre.Len() >= s.cfg.MaxHandshakes {
		drop = s.pre.Remove(s.pre.Front()).(*sconn)
		drop.preElem = nil
		drop.dropped = true // claim refuses it from now on
	}
	sc.preElem = s.pre.PushBack(sc)
	s.conns[sc] = struct{}{}
	s.readers.Add(1)
	s.mu.Unlock()
	if drop != nil {
		// Its goroutine wakes from its read (or write) with a deadline
		// error, says why and closes.
		s.hsDropped.Add(1)
		_ = drop.raw.SetReadDeadline(time.Now())
	}
	s.open.Add(1)
	go sc.serve()
}

// outBound is the most bytes of outcomes a connection's outbound buffer
// holds before the connection is closed as slow, for a client whose max
// frame is limit: twice the outcomes it may have pending (backpressure
// keeps it to MaxConnPending plus a frame's INITs; tasks taken over from
// an earlier connection bring that one's), and a frame.
func (s *Server) outBound(limit int) int { return 2*s.cfg.MaxConnPending*outcomeSize + limit }

// ConnBytes is the most heap one authenticated connection holds, for a
// client whose max frame is MaxFrame (one that asks for more is held to
// it only by the server's MaxFrame on what it sends, and its outcome
// frames are bounded by outBound all the same):
//
//	read buffer         MaxFrame + 64 KiB (a frame and a read chunk)
//	decoded frame       maxMsgsPerFrame(MaxFrame) x 32 B (ackcore.Msg)
//	refused INITs       maxMsgsPerFrame(MaxFrame) x 32 B (ackcore.Outcome)
//	router's batch      2 x Shards x RingSize x 32 B (all the rings hold, grown by append)
//	outbound buffers    2 x (2 x MaxConnPending x 24 B + MaxFrame)
//
// The two outbound buffers are the one the router fills and the one the
// writer writes; each is closed as slow before it would pass its bound
// (twice the outcomes a connection may have pending: tasks taken over
// from an earlier connection bring that one's).
func (s *Server) ConnBytes() int64 {
	f := int64(s.cfg.MaxFrame)
	per := int64(maxMsgsPerFrame(s.cfg.MaxFrame))
	msg, out := int64(unsafe.Sizeof(ackcore.Msg{})), int64(unsafe.Sizeof(ackcore.Outcome{}))
	return f + readChunk + per*msg + per*out + 2*int64(s.cfg.Shards)*int64(s.cfg.RingSize)*out +
		2*int64(s.outBound(s.cfg.MaxFrame))
}

// Stats returns the server's counters (the acker's are at most a tick
// old while it runs).
func (s *Server) Stats() ServerStats {
	st := ServerStats{
		Accepted: s.accepted.Load(), Refused: s.refused.Load(), HandshakeFails: s.hsFails.Load(),
		HandshakesDropped: s.hsDropped.Load(), InitsRefused: s.initsRefused.Load(), ResetsDropped: s.resetsDropped.Load(),
		ProtocolErrors: s.protoErrs.Load(), SlowClosed: s.slow.Load(), Open: s.open.Load(),
		Msgs: s.msgs.Load(), Outcomes: s.outcomes.Load(), Unrouted: s.unrouted.Load(),
		FramesIn: s.framesIn.Load(), BytesIn: s.bytesIn.Load(), FramesOut: s.framesOut.Load(), BytesOut: s.bytesOut.Load(),
		HandshakeFailures: s.handshakeFailures(), Unallocated: s.pool.Load(),
	}
	s.mu.Lock()
	stopped := s.closing
	st.InHandshake = s.pre.Len()
	s.mu.Unlock()
	if stopped {
		st.Acker = s.final
	} else {
		st.Acker = s.ak.Stats()
	}
	return st
}

// Shutdown stops the server gracefully: it stops accepting and reading,
// applies every message already read, reports every root still pending
// as Failed{stopped} to the connection owning its task, sends each
// connection a close frame (closeShutdown) after its last outcomes, and
// closes it. If ctx ends first, the connections still writing are closed
// at once and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	conns := s.beginClose()
	// Stop reading: readers wake with a deadline error and exit without
	// giving up their tasks, so the last outcomes still find them.
	for _, c := range conns {
		c.stopReading()
	}
	s.readers.Wait()
	s.stopAcker()
	for _, c := range conns {
		c.finish(closeShutdown, "server shutting down")
	}
	done := make(chan struct{})
	go func() { s.writers.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		for _, c := range conns {
			c.raw.Close()
		}
		<-done
		return ctx.Err()
	}
}

// Close stops the server at once, as a crash would look to its clients:
// every connection is closed without its outcomes.
func (s *Server) Close() error {
	conns := s.beginClose()
	for _, c := range conns {
		c.raw.Close()
	}
	s.readers.Wait()
	s.stopAcker()
	s.writers.Wait()
	return nil
}

func (s *Server) beginClose() []*sconn {
	s.mu.Lock()
	s.closing = true
	for _, ln := range s.lns {
		ln.Close()
	}
	conns := make([]*sconn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.accepting.Wait()
	return conns
}

func (s *Server) stopAcker() {
	s.stopOnce.Do(func() {
		st := s.ak.Stop()
		s.routers.Wait()
		s.mu.Lock()
		s.final = st
		s.mu.Unlock()
	})
}

// route takes outcomes from one acker receiver and queues each on the
// connection owning its task, encoding them straight into that
// connection's outbound buffer: one lock and one writer wake-up per
// connection per batch taken.
func (s *Server) route(r *acker.Receiver) {
	defer s.routers.Done()
	outs := make([]ackcore.Outcome, 0, 4096)
	var touched []*sconn
	var unrouted int64
	for {
		var ok bool
		outs, ok = r.Wait(outs[:0])
		if !ok {
			return
		}
		for i := range outs {
			o := &outs[i]
			var c *sconn
			if o.Task < uint32(len(s.owner)) {
				c = s.owner[o.Task].Load()
			}
			if c == nil {
				s.unrouted.Add(1)
				unrouted++
				continue
			}
			if len(c.rbuf) == 0 {
				touched = append(touched, c)
			}
			c.rbuf = append(c.rbuf, *o)
		}
		if unrouted > 0 && !s.sharesOff {
			// Roots of connections gone: their room returns to the pool.
			s.pool.Add(unrouted)
			unrouted = 0
		}
		for _, c := range touched {
			s.unheld(c, int64(len(c.rbuf)))
			c.queueOutcomes(c.rbuf)
			s.outcomes.Add(uint64(len(c.rbuf)))
			c.rbuf = c.rbuf[:0]
		}
		// Clear the pointers, not only the length: a stale *sconn in the
		// backing array would keep a closed connection's buffers live.
		clear(touched)
		touched = touched[:0]
	}
}
