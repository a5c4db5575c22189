package netio

import (
	"container/list"
	"context"
	"crypto/rand"
	"crypto/tls"
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
	// Shards is the acker's shards (default DefaultShards).
	Shards int
	// Shard configures each shard (MaxPending is required, per shard).
	Shard ackcore.Config
	// MaxBytes is the acker's memory budget: the most its tables, rings
	// and held outcomes may take together (acker.Config.MaxBytes; 0:
	// acker.DefaultMaxBytes). NewServer fails, naming the bytes, for a
	// configuration that could take more.
	MaxBytes int64
	// Tasks is the number of spout task ids clients may own, [0, Tasks);
	// default DefaultTasks.
	Tasks int
	// MaxConns bounds the authenticated connections open at once
	// (default DefaultMaxConns); one more that authenticates is closed with
	// closeOverloaded. Each is one acker producer with a ring into every
	// shard. Connections still in the handshake count against
	// MaxHandshakes instead.
	MaxConns int
	// MaxHandshakes bounds the connections still in the handshake
	// (default DefaultMaxHandshakes). A new connection that finds it full
	// closes the oldest one still handshaking (closeOverloaded): idle or
	// slow handshakes, however many, never keep a client out.
	MaxHandshakes int
	// MaxRootTimeout caps the timeout an INIT or a RESET may ask for
	// (default 4 x Shard.Timeout, at most
	// ackcore.MaxTimeout, whole milliseconds, at least Shard.Timeout); a
	// message past it is a protocol error, so that an entry a connection
	// made outlives it by at most this long.
	MaxRootTimeout time.Duration
	// MaxFrame bounds the frames the server accepts after a handshake
	// (default DefaultMaxFrame); before it, handshakeMaxFrame.
	MaxFrame int
	// MaxConnPending bounds, per connection, the roots whose INIT the
	// server has taken and whose outcome it has not yet written: past it,
	// the server stops reading that connection until outcomes drain
	// (backpressure), so a client that does not read holds at most this
	// many outcomes in the server. Default DefaultMaxConnPending.
	MaxConnPending int
	// ShareSlack is the reserve: the room of the acker's table kept off
	// the connections' base shares (Server.Share), which any connection
	// may draw on past its share, all of them together at most this
	// much: a connection's count of roots held in the acker runs ahead
	// of its entries in the table by the outcomes on their way to the
	// router. 0 means eight rings' worth, 8 × Shards × RingSize; at most
	// a quarter of the table is kept. At or above Shards × MaxPending it
	// turns the shares off: no bound but the acker's, for a host that
	// expects no flood.
	ShareSlack int
	// HandshakeTimeout bounds the handshake, TLS included (default
	// DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// IdleTimeout closes a connection that sent nothing, not even a
	// heartbeat, for this long (default DefaultIdleTimeout); both sides
	// send heartbeats every IdleTimeout/3 when otherwise idle.
	IdleTimeout time.Duration
	// WriteTimeout closes a connection whose socket takes no bytes for
	// this long: a client that stopped reading (default
	// DefaultWriteTimeout).
	WriteTimeout time.Duration
	// RingSize is each connection's ring into each shard (default
	// DefaultRingSize).
	RingSize int
	// Pin pins the shard executors (acker.Config.Pin).
	Pin bool
	// Idle is how the shard executors and the outcome router wait for
	// work (acker.Config.Idle); nil means DefaultIdle().
	Idle *ring.Idle
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
}

// Validate reports whether c is a configuration NewServer accepts: the
// error NewServer would return, naming the field and its value.
func (c ServerConfig) Validate() error {
	_, err := c.validate()
	return err
}

// validate fills every zero field of c from its default and checks every
// field: it returns the filled copy, or an error naming the field and
// its value. NewServer keeps only the copy.
func (c ServerConfig) validate() (ServerConfig, error) {
	if len(c.Secret) < minSecretBytes {
		return c, fmt.Errorf("netio: ServerConfig.Secret of %d bytes, want at least %d", len(c.Secret), minSecretBytes)
	}
	if c.Shards == 0 {
		c.Shards = DefaultShards
	}
	if c.Tasks == 0 {
		c.Tasks = DefaultTasks
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxHandshakes == 0 {
		c.MaxHandshakes = DefaultMaxHandshakes
	}
	def := c.Shard.Timeout
	if def == 0 {
		def = ackcore.DefaultTimeout
	}
	if c.MaxRootTimeout == 0 {
		c.MaxRootTimeout = min(rootTimeoutFactor*def, ackcore.MaxTimeout)
	}
	if c.MaxFrame == 0 {
		c.MaxFrame = DefaultMaxFrame
	}
	if c.MaxConnPending == 0 {
		c.MaxConnPending = DefaultMaxConnPending
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.RingSize == 0 {
		c.RingSize = DefaultRingSize
	}
	if c.ShareSlack == 0 && c.Shards > 0 && c.RingSize > 0 {
		c.ShareSlack = defaultSlackRings * c.Shards * c.RingSize
	}
	const pre = "netio: ServerConfig."
	switch {
	case c.Shards < 1:
		return c, fmt.Errorf(pre+"Shards %d below 1", c.Shards)
	case c.Tasks < 1 || c.Tasks > ackcore.MaxTask+1:
		return c, fmt.Errorf(pre+"Tasks %d out of range [1, %d]", c.Tasks, ackcore.MaxTask+1)
	case c.MaxConns < 1 || c.MaxConns > maxConnsLimit:
		return c, fmt.Errorf(pre+"MaxConns %d out of range [1, %d]", c.MaxConns, maxConnsLimit)
	case c.MaxHandshakes < 1 || c.MaxHandshakes > maxHandshakesLimit:
		return c, fmt.Errorf(pre+"MaxHandshakes %d out of range [1, %d]", c.MaxHandshakes, maxHandshakesLimit)
	case c.MaxRootTimeout < def || c.MaxRootTimeout > ackcore.MaxTimeout || c.MaxRootTimeout%time.Millisecond != 0:
		return c, fmt.Errorf(pre+"MaxRootTimeout %v out of range [%v (Shard.Timeout), %v] or not whole milliseconds", c.MaxRootTimeout, def, ackcore.MaxTimeout)
	case c.MaxFrame < minMaxFrame || c.MaxFrame > maxMaxFrame:
		return c, fmt.Errorf(pre+"MaxFrame %d out of range [%d, %d]", c.MaxFrame, minMaxFrame, maxMaxFrame)
	case c.MaxConnPending < 1:
		return c, fmt.Errorf(pre+"MaxConnPending %d below 1", c.MaxConnPending)
	case c.ShareSlack < 0:
		return c, fmt.Errorf(pre+"ShareSlack %d below 0", c.ShareSlack)
	case c.MaxBytes < 0:
		return c, fmt.Errorf(pre+"MaxBytes %d below 0 (0: acker.DefaultMaxBytes)", c.MaxBytes)
	case c.IdleTimeout < minIdleTimeout:
		return c, fmt.Errorf(pre+"IdleTimeout %v below %v", c.IdleTimeout, minIdleTimeout)
	case c.RingSize < 0:
		return c, fmt.Errorf(pre+"RingSize %d below 0", c.RingSize)
	}
	if err := nonNegative(pre, namedDuration{"HandshakeTimeout", c.HandshakeTimeout}, namedDuration{"WriteTimeout", c.WriteTimeout}); err != nil {
		return c, err
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Idle == nil {
		i := DefaultIdle()
		c.Idle = &i
	}
	return c, nil
}

// namedDuration is a config field's name and value.
type namedDuration struct {
	name string
	d    time.Duration
}

// nonNegative returns an error naming the first of fields below 0,
// prefixed with pre (the config's name).
func nonNegative(pre string, fields ...namedDuration) error {
	for _, f := range fields {
		if f.d < 0 {
			return fmt.Errorf("%s%s %v below 0", pre, f.name, f.d)
		}
	}
	return nil
}

// minSecretBytes is the shortest shared secret a server or a client
// accepts.
const minSecretBytes = 16

// Defaults of ServerConfig.
const (
	// DefaultShards is Shards' default: one shard, one executor; a host
	// with cores to spare for the acker raises it.
	DefaultShards = 1
	// DefaultTasks is Tasks' default: the spout task ids clients may own.
	DefaultTasks = 4096
	// DefaultMaxConns is MaxConns' default: each connection is an acker
	// producer with a ring into every shard, and every executor's spin
	// looks at each of them.
	DefaultMaxConns = 128
	// DefaultMaxConnPending is MaxConnPending's default: 65,536 roots
	// per connection, 1.5 MiB of outcomes held for a client that stops
	// reading.
	DefaultMaxConnPending = 1 << 16
	// DefaultIdleTimeout is IdleTimeout's default; heartbeats go every
	// third of it.
	DefaultIdleTimeout = 30 * time.Second
	// DefaultWriteTimeout is WriteTimeout's default, the server's and the
	// client's (ClientConfig.WriteTimeout): a peer whose socket takes no
	// bytes for this long is given up.
	DefaultWriteTimeout = 10 * time.Second
	// DefaultRingSize is RingSize's default: each connection's ring into
	// each shard, in messages.
	DefaultRingSize = 1024
	// DefaultMaxHandshakes is MaxHandshakes' default: far more than
	// clients ever reconnect at once (a handshake takes a round trip or
	// two), few enough that their goroutines and buffers (a challenge
	// written, at most handshakeMaxFrame read) stay small.
	DefaultMaxHandshakes = 64
	// DefaultHandshakeTimeout is HandshakeTimeout's default: a TLS and
	// netio handshake is three round trips; 3 s leaves room for a lossy
	// WAN and still frees a slowloris' goroutine soon.
	DefaultHandshakeTimeout = 3 * time.Second
	// rootTimeoutFactor times the default root timeout is the default
	// MaxRootTimeout: room for roots that ask for longer than the default,
	// while what a departed connection left behind is gone within minutes.
	rootTimeoutFactor = 4
)

// closeWriteTimeout bounds the write of a close frame that ends a
// connection for cause (overloaded, replaced, slow, a protocol error in
// the handshake): best effort, as a peer that does not read would
// otherwise hold the goroutine for the whole WriteTimeout.
const closeWriteTimeout = 250 * time.Millisecond

// Ranges a ServerConfig is checked against.
const (
	maxConnsLimit      = 4096     // MaxConns at most
	maxHandshakesLimit = 1 << 16  // MaxHandshakes at most
	maxMaxFrame        = 64 << 20 // MaxFrame at most, server and client
	// minIdleTimeout is IdleTimeout at least: heartbeats go every third
	// of it.
	minIdleTimeout = 30 * time.Millisecond
)

// peerCheckInterval is how often a reader held by backpressure looks
// whether its peer closed (peerGone): it cannot see EOF, as it does not
// read.
const peerCheckInterval = 100 * time.Millisecond

// DefaultIdle returns how a server's executors wait by default: a shorter
// spin than ring's default (512 spins, 16 yields). An executor's fan-in
// has one ring per connection slot (MaxConns of them, 128 by default),
// and every spin looks at each, so a long spin costs in proportion to
// MaxConns; and what wakes an executor here is a socket read, microseconds
// apart, which a short spin does not outlast. (It once also avoided a
// clock read per spin in ring's wait for the shard's tick; ring now looks
// at its timer once per 64 spins. Measured since, with 1 and 4
// connections: ring's default cost 0-20% more CPU per message than this,
// median 4%, on the 2-vCPU machine.)
func DefaultIdle() ring.Idle { return ring.Idle{Spins: 32, Yields: 8} }

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
		go s.route(ak.Receiver(r))
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
