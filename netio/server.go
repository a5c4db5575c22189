package netio

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/ring"
)

// ServerConfig configures a Server. The zero value of every field but
// Secret and Shard.MaxPending means its default.
type ServerConfig struct {
	// Secret is the shared secret every client proves it knows in the
	// handshake. Required, at least 16 bytes.
	Secret []byte
	// TLS, when set, wraps every connection in TLS with this
	// configuration; set ClientAuth (tls.RequireAndVerifyClientCert) for
	// mutual TLS.
	TLS *tls.Config
	// Shards is the acker's shards (default 1).
	Shards int
	// Shard configures each shard (MaxPending is required, per shard).
	Shard ackcore.Config
	// Tasks is the number of spout task ids clients may own, [0, Tasks);
	// default 4096.
	Tasks int
	// MaxConns bounds the connections open at once, handshaking or not
	// (default 128); one more is closed at once. Each connection slot is
	// one acker producer with a ring into every shard.
	MaxConns int
	// MaxFrame bounds the frames the server accepts after a handshake
	// (default DefaultMaxFrame); before it, HandshakeMaxFrame.
	MaxFrame int
	// MaxConnPending bounds, per connection, the roots whose INIT the
	// server has taken and whose outcome it has not yet written: past it,
	// the server stops reading that connection until outcomes drain
	// (backpressure), so a client that does not read holds at most this
	// many outcomes in the server. Default 1<<16.
	MaxConnPending int
	// HandshakeTimeout bounds the handshake, TLS included (default 5s).
	HandshakeTimeout time.Duration
	// IdleTimeout closes a connection that sent nothing, not even a
	// heartbeat, for this long (default 30s); both sides send heartbeats
	// every IdleTimeout/3 when otherwise idle.
	IdleTimeout time.Duration
	// WriteTimeout closes a connection whose socket takes no bytes for
	// this long: a client that stopped reading (default 10s).
	WriteTimeout time.Duration
	// RingSize is each connection's ring into each shard (default 1024).
	RingSize int
	// Pin pins the shard executors (acker.Config.Pin).
	Pin bool
	// Idle is how the shard executors and the outcome router wait for
	// work (acker.Config.Idle); nil means DefaultIdle.
	Idle *ring.Idle
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
}

func (c *ServerConfig) fill() error {
	if len(c.Secret) < 16 {
		return fmt.Errorf("netio: secret of %d bytes, want at least 16", len(c.Secret))
	}
	if c.Shards == 0 {
		c.Shards = 1
	}
	if c.Tasks == 0 {
		c.Tasks = 4096
	}
	if c.MaxConns == 0 {
		c.MaxConns = 128
	}
	if c.MaxFrame == 0 {
		c.MaxFrame = DefaultMaxFrame
	}
	if c.MaxConnPending == 0 {
		c.MaxConnPending = 1 << 16
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = 5 * time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 30 * time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.RingSize == 0 {
		c.RingSize = 1024
	}
	switch {
	case c.Tasks < 1 || c.Tasks > ackcore.MaxTask+1:
		return fmt.Errorf("netio: Tasks %d out of range [1, %d]", c.Tasks, ackcore.MaxTask+1)
	case c.MaxConns < 1 || c.MaxConns > 4096:
		return fmt.Errorf("netio: MaxConns %d out of range [1, 4096]", c.MaxConns)
	case c.MaxFrame < MinMaxFrame || c.MaxFrame > 64<<20:
		return fmt.Errorf("netio: MaxFrame %d out of range [%d, %d]", c.MaxFrame, MinMaxFrame, 64<<20)
	case c.MaxConnPending < 1:
		return fmt.Errorf("netio: MaxConnPending %d below 1", c.MaxConnPending)
	case c.HandshakeTimeout < 0 || c.WriteTimeout < 0:
		return fmt.Errorf("netio: negative timeout (handshake %v, write %v)", c.HandshakeTimeout, c.WriteTimeout)
	case c.IdleTimeout < 30*time.Millisecond:
		return fmt.Errorf("netio: IdleTimeout %v below 30ms", c.IdleTimeout)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Idle == nil {
		i := DefaultIdle
		c.Idle = &i
	}
	return nil
}

// DefaultIdle is how a server's executors wait by default: a shorter
// spin than ring's default (512 spins, 16 yields). An executor's fan-in
// has one ring per connection slot (MaxConns of them, 128 by default),
// and every spin looks at each, so a long spin costs in proportion to
// MaxConns; and what wakes an executor here is a socket read, microseconds
// apart, which a short spin does not outlast. (It once also avoided a
// clock read per spin in ring's wait for the shard's tick; ring now looks
// at its timer once per 64 spins. Measured since, with 1 and 4
// connections: ring's default cost 0-20% more CPU per message than this,
// median 4%, on the 2-vCPU machine.)
var DefaultIdle = ring.Idle{Spins: 32, Yields: 8}

// ServerStats are a server's counters.
type ServerStats struct {
	Accepted       uint64 // connections accepted
	Refused        uint64 // closed at once: MaxConns reached or shutting down
	HandshakeFails uint64 // closed during the handshake (auth, protocol, timeout, task taken)
	ProtocolErrors uint64 // authenticated connections closed for a malformed frame
	SlowClosed     uint64 // closed for not reading (write timeout or outcome bound)
	Open           int64  // connections open now
	Msgs           uint64 // messages handed to the acker
	Outcomes       uint64 // outcomes queued to a connection
	Unrouted       uint64 // outcomes whose task had no connection (dropped)
	Acker          ackcore.Stats
}

// Server serves a sharded acker.Acker over TCP (see the package doc).
type Server struct {
	cfg   ServerConfig
	ak    *acker.Acker
	id    uint64
	log   *slog.Logger
	owner []atomic.Pointer[sconn] // owner[task]: the connection that owns spout task
	slots chan int                // free producer indices

	mu        sync.Mutex // guards lns, conns, closing, ownership changes
	lns       []net.Listener
	conns     map[*sconn]struct{}
	closing   bool
	readers   sync.WaitGroup // connection goroutines (handshake and reader)
	routers   sync.WaitGroup
	writers   sync.WaitGroup
	accepting sync.WaitGroup
	stopOnce  sync.Once
	final     ackcore.Stats

	accepted, refused, hsFails, protoErrs, slow atomic.Uint64
	open                                        atomic.Int64
	// msgs is added to by the readers, outcomes and unrouted by the
	// router: on lines of their own.
	_                  [64]byte
	msgs               atomic.Uint64
	_                  [56]byte
	outcomes, unrouted atomic.Uint64
	_                  [48]byte
}

// NewServer builds a server and starts its acker; Serve accepts
// connections.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	routers := 1
	ak, err := acker.New(acker.Config{
		Shards: cfg.Shards, Producers: cfg.MaxConns, Tasks: cfg.Tasks, Receivers: routers,
		Shard: cfg.Shard, RingSize: cfg.RingSize, Pin: cfg.Pin, Idle: cfg.Idle,
	})
	if err != nil {
		return nil, fmt.Errorf("netio: %w", err)
	}
	s := &Server{cfg: cfg, ak: ak, log: cfg.Logger, owner: make([]atomic.Pointer[sconn], cfg.Tasks),
		slots: make(chan int, cfg.MaxConns), conns: map[*sconn]struct{}{}}
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
		go s.route(ak.Receiver(r))
	}
	return s, nil
}

// ListenAndServe listens on addr (TCP) and serves until Shutdown or
// Close.
func (s *Server) ListenAndServe(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("netio: %w", err)
	}
	return s.Serve(ln)
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

// admit takes a producer slot for c and starts its goroutine, or closes c.
func (s *Server) admit(c net.Conn) {
	var slot int
	select {
	case slot = <-s.slots:
	default:
		s.refused.Add(1)
		s.log.Warn("netio: connection refused", "remote", c.RemoteAddr().String(), "reason", fmt.Sprintf("max connections %d reached", s.cfg.MaxConns))
		// Best effort, never blocking the accept loop: a close frame in
		// the socket buffer, then close.
		_ = c.SetWriteDeadline(time.Now())
		_, _ = c.Write(AppendClose(nil, CloseOverloaded, "server at its connection limit"))
		c.Close()
		return
	}
	sc := &sconn{s: s, raw: c, nc: c, slot: slot, wake: make(chan struct{}, 1), room: make(chan struct{}, 1),
		done: make(chan struct{})}
	sc.refs.Store(2) // the reader and the writer; the writer starts after the handshake
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		s.refused.Add(1)
		s.slots <- slot
		c.Close()
		return
	}
	s.conns[sc] = struct{}{}
	s.readers.Add(1)
	s.mu.Unlock()
	s.open.Add(1)
	go sc.serve()
}

// Stats returns the server's counters (the acker's are at most a tick
// old while it runs).
func (s *Server) Stats() ServerStats {
	st := ServerStats{
		Accepted: s.accepted.Load(), Refused: s.refused.Load(), HandshakeFails: s.hsFails.Load(),
		ProtocolErrors: s.protoErrs.Load(), SlowClosed: s.slow.Load(), Open: s.open.Load(),
		Msgs: s.msgs.Load(), Outcomes: s.outcomes.Load(), Unrouted: s.unrouted.Load(),
	}
	s.mu.Lock()
	stopped := s.closing
	s.mu.Unlock()
	if stopped {
		st.Acker = s.final
	} else {
		st.Acker = s.ak.Stats()
	}
	return st
}

// Addrs returns the addresses the server listens on.
func (s *Server) Addrs() []net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	var a []net.Addr
	for _, ln := range s.lns {
		a = append(a, ln.Addr())
	}
	return a
}

// Shutdown stops the server gracefully: it stops accepting and reading,
// applies every message already read, reports every root still pending
// as Failed{stopped} to the connection owning its task, sends each
// connection a close frame (CloseShutdown) after its last outcomes, and
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
		c.finish(CloseShutdown, "server shutting down")
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
				continue
			}
			if len(c.rbuf) == 0 {
				touched = append(touched, c)
			}
			c.rbuf = append(c.rbuf, *o)
		}
		for _, c := range touched {
			c.queueOutcomes(c.rbuf)
			s.outcomes.Add(uint64(len(c.rbuf)))
			c.rbuf = c.rbuf[:0]
		}
		touched = touched[:0]
	}
}

// sconn is one server connection. The reader goroutine (serve) owns fr,
// msgs and the acker producer; the router owns rbuf; mu guards out and
// the fields marked so; the writer goroutine owns spare.
type sconn struct {
	s    *Server
	raw  net.Conn // immutable: deadlines and Close from any goroutine
	nc   net.Conn // raw, or TLS over it: reads by the reader, writes by the writer
	slot int
	refs atomic.Int32 // reader and writer still running; the last frees the slot
	id   uint64       // client id, set by the handshake
	tag  string       // for logs
	fr   *FrameReader
	msgs []ackcore.Msg

	tasks []TaskRange
	limit int // the client's max frame

	rbuf []ackcore.Outcome // router's batch for this connection

	pending  atomic.Int64  // roots whose INIT was read and whose outcome was not yet written
	room     chan struct{} // reader waits here while pending is at the bound
	roomWait atomic.Bool   // the reader waits (or is about to) on room

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

func (c *sconn) stopReading() {
	c.stopped.Store(true)
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
		s.log.Warn("netio: handshake failed", "remote", c.tag, "reason", err.Error())
		return
	}
	authed = true
	s.writers.Add(1)
	go c.writer()
	err := c.readLoop()
	p := s.ak.Producer(c.slot)
	ferr := p.Flush()
	switch {
	case c.stopped.Load():
		// Shutdown: keep the tasks until the final outcomes are written.
		return
	case err == nil || errors.Is(err, io.EOF):
		s.log.Info("netio: client closed", "remote", c.tag, "client", c.id)
	default:
		s.log.Warn("netio: connection closed", "remote", c.tag, "client", c.id, "reason", err.Error())
	}
	_ = ferr
	c.release()
	c.finish(codeOf(err), reasonOf(err))
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
	s.mu.Unlock()
	s.open.Add(-1)
	s.slots <- c.slot
}

// handshake authenticates the client and claims its tasks.
func (c *sconn) handshake() error {
	s := c.s
	deadline := time.Now().Add(s.cfg.HandshakeTimeout)
	_ = c.raw.SetDeadline(deadline)
	if s.cfg.TLS != nil {
		tc := tls.Server(c.nc, s.cfg.TLS)
		if err := tc.Handshake(); err != nil {
			return fmt.Errorf("netio: TLS handshake: %w", err)
		}
		c.nc = tc
	}
	ch := Challenge{MaxFrame: uint32(s.cfg.MaxFrame), Tasks: uint32(s.cfg.Tasks)}
	if _, err := rand.Read(ch.Nonce[:]); err != nil {
		return err
	}
	if _, err := c.nc.Write(AppendChallenge(nil, &ch)); err != nil {
		return fmt.Errorf("netio: writing challenge: %w", err)
	}
	c.fr = NewFrameReader(c.nc, HandshakeMaxFrame)
	f, err := c.fr.Next()
	if err != nil {
		return fmt.Errorf("netio: reading hello: %w", err)
	}
	if f.Type != TypeHello {
		c.reject(CloseProtocol, "expected hello")
		return fmt.Errorf("netio: first frame is %s, want hello", typeName(f.Type))
	}
	h, err := DecodeHello(f.Body, uint32(s.cfg.Tasks))
	if err != nil {
		c.reject(CloseProtocol, "malformed hello")
		return err
	}
	if err := checkHelloMAC(s.cfg.Secret, &ch.Nonce, &h); err != nil {
		c.reject(CloseAuth, "authentication failed")
		return err
	}
	c.id, c.tasks, c.limit = h.ClientID, h.Tasks, int(min(h.MaxFrame, 64<<20))
	if err := c.claim(); err != nil {
		c.reject(CloseTaskOwned, err.Error())
		return err
	}
	hb := s.cfg.IdleTimeout / 3
	w := Welcome{ServerID: s.id, Heartbeat: hb, Idle: s.cfg.IdleTimeout}
	if _, err := c.nc.Write(AppendWelcome(nil, &w)); err != nil {
		c.release()
		return fmt.Errorf("netio: writing welcome: %w", err)
	}
	_ = c.raw.SetDeadline(time.Time{})
	c.fr.SetLimit(s.cfg.MaxFrame)
	s.log.Info("netio: client connected", "remote", c.tag, "client", c.id, "tasks", len(c.tasks))
	return nil
}

// reject writes a close frame during the handshake (the deadline bounds
// it).
func (c *sconn) reject(code uint16, reason string) {
	_, _ = c.nc.Write(AppendClose(nil, code, reason))
}

// claim makes c the owner of its tasks. A task owned by a connection of
// another client is refused; one owned by an earlier connection of the
// same client is taken over (a reconnect the server has not noticed yet),
// and that connection is closed.
func (c *sconn) claim() error {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return errors.New("netio: server shutting down")
	}
	var replaced []*sconn
	for _, r := range c.tasks {
		for t := r.First; t < r.First+r.Count; t++ {
			if o := s.owner[t].Load(); o != nil && o != c && o.id != c.id {
				return fmt.Errorf("netio: client %#x claims task %d, owned by client %#x", c.id, t, o.id)
			}
		}
	}
	for _, r := range c.tasks {
		for t := r.First; t < r.First+r.Count; t++ {
			if o := s.owner[t].Swap(c); o != nil && o != c && (len(replaced) == 0 || replaced[len(replaced)-1] != o) {
				replaced = append(replaced, o)
			}
		}
	}
	for _, o := range replaced {
		s.log.Info("netio: connection replaced by a newer one of the same client", "remote", o.tag, "client", o.id)
		o.raw.Close() // its reader and writer exit
	}
	return nil
}

// release gives up c's tasks (those still owned by c).
func (c *sconn) release() {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range c.tasks {
		for t := r.First; t < r.First+r.Count; t++ {
			s.owner[t].CompareAndSwap(c, nil)
		}
	}
}

// readLoop reads frames and hands messages to the acker, flushing the
// producer whenever the read buffer is empty (before the next read may
// block): one publish per shard per read batch.
func (c *sconn) readLoop() error {
	s := c.s
	p := s.ak.Producer(c.slot)
	idle := s.cfg.IdleTimeout
	max := int64(s.cfg.MaxConnPending)
	var lastDeadline time.Time
	// read counts the messages handed to the acker since the last
	// flush: the server's shared counter is added to once per read batch.
	// taken counts the INITs taken since then, added to pending (which
	// the writer lowers) once per read batch too, against base, pending
	// as it was then: the writer only lowers it, so base+taken never
	// understates it, and only when base+taken would pass the bound does
	// the reader look at pending itself. Per frame, the counter's line
	// would bounce between the reader's and the writer's cores.
	var read uint64
	var base, taken int64
	defer func() { s.msgs.Add(read); c.pending.Add(taken) }()
	for {
		if !c.fr.Ready() {
			if taken > 0 {
				c.pending.Add(taken)
				taken = 0
			}
			base = c.pending.Load()
			if err := p.Flush(); err != nil {
				return err
			}
			if read > 0 {
				s.msgs.Add(read)
				read = 0
			}
			// Setting a deadline costs a timer update: do it once per
			// tenth of the idle timeout, not per read.
			if now := time.Now(); now.Sub(lastDeadline) > idle/10 {
				_ = c.raw.SetReadDeadline(now.Add(idle))
				lastDeadline = now
			}
		}
		if c.stopped.Load() {
			return nil
		}
		f, err := c.fr.Next()
		if err != nil {
			if c.stopped.Load() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return &closeError{CloseIdle, fmt.Errorf("netio: nothing received for %v (idle timeout)", idle)}
			}
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return io.EOF
			}
			return c.protocolError(err)
		}
		switch f.Type {
		case TypeMsgs:
			var n int
			c.msgs, n, err = decodeMsgs(c.msgs[:0], f.Body, c.owns)
			if err != nil {
				return c.protocolError(err)
			}
			inits := int64(n)
			if inits > 0 && base+taken+inits > max {
				// Maybe at the bound: count exactly.
				c.pending.Add(taken)
				taken = 0
				for c.pending.Load()+inits > max && c.pending.Load() > 0 {
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
					if c.pending.Load()+inits > max && c.pending.Load() > 0 {
						select {
						case <-c.room:
						case <-c.done:
							return io.EOF
						}
					}
					c.roomWait.Store(false)
					if c.stopped.Load() {
						return nil
					}
				}
				base = c.pending.Load()
			}
			taken += inits
			if err := p.SendBatch(c.msgs); err != nil {
				return err
			}
			read += uint64(len(c.msgs))
		case TypeHeartbeat:
		case TypeClose:
			code, reason, err := DecodeClose(f.Body)
			if err != nil {
				return c.protocolError(err)
			}
			s.log.Info("netio: client said goodbye", "remote", c.tag, "client", c.id, "code", code, "reason", reason)
			return nil
		default:
			return c.protocolError(fmt.Errorf("netio: unexpected %s frame from a client", typeName(f.Type)))
		}
	}
}

// owns reports whether c owns spout task t now (reader side).
func (c *sconn) owns(t uint32) bool {
	return t < uint32(len(c.s.owner)) && c.s.owner[t].Load() == c
}

func (c *sconn) protocolError(err error) error {
	c.s.protoErrs.Add(1)
	return &closeError{CloseProtocol, err}
}

// closeError carries the close code a connection ends with.
type closeError struct {
	code uint16
	err  error
}

func (e *closeError) Error() string { return e.err.Error() }
func (e *closeError) Unwrap() error { return e.err }

func codeOf(err error) uint16 {
	var ce *closeError
	if errors.As(err, &ce) {
		return ce.code
	}
	return CloseNormal
}

func reasonOf(err error) string {
	if err == nil || errors.Is(err, io.EOF) {
		return "goodbye"
	}
	return err.Error()
}

// queueOutcomes encodes outs into c's outbound buffer (router side).
func (c *sconn) queueOutcomes(outs []ackcore.Outcome) {
	per := MaxMsgsPerFrame(c.limit)
	c.mu.Lock()
	if c.finished {
		c.mu.Unlock()
		return
	}
	for len(outs) > 0 {
		n := min(len(outs), per)
		c.out = AppendOutcomes(c.out, outs[:n])
		c.nout += n
		outs = outs[n:]
	}
	over := len(c.out) > 2*c.s.cfg.MaxConnPending*OutcomeSize+c.limit
	wake := c.writerIdle || over
	c.writerIdle = false
	c.mu.Unlock()
	if over {
		// More outcomes than the roots it may have pending (tasks taken
		// over from an earlier connection): it is not reading. Cut it
		// loose rather than hold them.
		c.s.slow.Add(1)
		c.s.log.Warn("netio: client not taking its outcomes", "remote", c.tag, "client", c.id)
		c.mu.Lock()
		c.finished = true
		c.mu.Unlock()
		c.raw.Close()
	}
	if wake {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// finish queues a close frame after everything queued; the writer then
// writes out and closes the connection.
func (c *sconn) finish(code uint16, reason string) {
	c.mu.Lock()
	if !c.finished {
		c.finished = true
		c.closeMsg = AppendClose(nil, code, reason)
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
		c.raw.Close()
		c.unref()
	}()
	hb := s.cfg.IdleTimeout / 3
	wt := s.cfg.WriteTimeout
	t := time.NewTimer(hb)
	defer t.Stop()
	var lastDeadline time.Time
	for {
		c.mu.Lock()
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
					if err := c.write(AppendHeartbeat(c.spare[:0]), &lastDeadline, wt); err != nil {
						return
					}
				}
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
		err := c.write(buf, &lastDeadline, wt)
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
// older than a tenth of wt; on an error it logs a stalled client and
// marks c finished.
func (c *sconn) write(buf []byte, lastDeadline *time.Time, wt time.Duration) error {
	s := c.s
	if len(buf) == 0 {
		return nil
	}
	if now := time.Now(); now.Sub(*lastDeadline) > wt/10 {
		_ = c.raw.SetWriteDeadline(now.Add(wt))
		*lastDeadline = now
	}
	_, err := c.nc.Write(buf)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			s.slow.Add(1)
			s.log.Warn("netio: client not reading; closing", "remote", c.tag, "client", c.id, "write_timeout", wt)
		}
		c.mu.Lock()
		c.finished = true
		c.mu.Unlock()
	}
	return err
}
