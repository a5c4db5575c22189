package netio

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/xorack/xorack/internal/layout"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/splitmix"
)

// ClientConfig configures the client side of a remote acker. Its Port
// method opens an acker.Port for an engine.
type ClientConfig struct {
	// Hosts are the ackerd addresses (host:port). A root belongs to the
	// host its keyed rendezvous hash picks among those connected; every
	// client of one topology must list the same addresses (in any order)
	// and the same HashKey, so that all messages of a root, from any
	// process, reach the same host. Required.
	Hosts []string
	// Secret is the servers' shared secret. Required.
	Secret []byte
	// TLS, when set, speaks TLS to every host (with a client certificate
	// in Certificates for mutual TLS). ServerName defaults to the host.
	TLS *tls.Config
	// ID identifies this client to the servers; a reconnect with the same
	// ID takes its tasks over from a connection the server has not yet
	// seen die. 0 draws a random one.
	ID uint64
	// TaskBase is the topology-wide id of the Spec's task 0: this client
	// owns tasks [TaskBase, TaskBase+Spec.Tasks) on the servers.
	TaskBase uint32
	// MaxPending bounds the roots in flight (INIT sent, outcome not yet
	// received), and each inbox's outcomes not yet taken. Send of an
	// INIT waits at the bound, after handing over what it staged (TrySend
	// says false); a full inbox holds its hosts' readers back. So a
	// goroutine that both sends and polls (a spout executor) must not let
	// MaxPending outcomes wait in its inbox while it sends: set the
	// engine's max spout pending below it. Default 1<<20.
	MaxPending int
	// FrameMsgs is the messages a sender stages per host before it hands
	// a frame to the connection (Flush hands over fewer). Default 2048.
	FrameMsgs int
	// QueueBytes bounds each host's send queue; a sender waits while it
	// is full (backpressure). Default 256 KiB (about 11,000 messages): a
	// deeper queue only adds latency once the connection is saturated.
	QueueBytes int
	// MaxFrame is the largest frame the client accepts (default
	// DefaultMaxFrame).
	MaxFrame int
	// DialTimeout bounds a connection attempt, handshake included
	// (default 5s). Port waits up to this long for the first attempt at
	// every host and fails if none connected; a host that refuses for
	// lack of room (CloseOverloaded: at MaxConns, or a handshake dropped
	// for a newer one under a connection flood) is tried again every
	// BackoffMin within that time before it counts as failed.
	DialTimeout time.Duration
	// WriteTimeout gives a host up when its socket takes no bytes for
	// this long (default 10s).
	WriteTimeout time.Duration
	// BackoffMin and BackoffMax bound the wait between reconnect attempts
	// to a host, doubled after each failure with jitter (default 50ms and
	// 5s).
	BackoffMin, BackoffMax time.Duration
	// HashKey keys the routing hash; 0 derives it from Secret, so that
	// clients sharing a secret agree.
	HashKey uint64
	// Logger receives connection events (connected, cannot connect, host
	// lost), every one. nil logs what went wrong, and only that, to
	// slog.Default (the log package's stderr unless the program set
	// another): a host's warnings at most once per LogInterval, the next
	// one saying how many were held back.
	Logger *slog.Logger
}

// LogInterval is the least time between two warnings about one host on
// the default logger (ClientConfig.Logger nil): a host refusing every
// retry is reported once a minute, not at every backoff step.
const LogInterval = time.Minute

func (c *ClientConfig) fill() error {
	if len(c.Hosts) == 0 {
		return errors.New("netio: no hosts")
	}
	if len(c.Hosts) > 1024 {
		return fmt.Errorf("netio: %d hosts, at most 1024", len(c.Hosts))
	}
	seen := map[string]bool{}
	for _, h := range c.Hosts {
		if seen[h] {
			return fmt.Errorf("netio: host %q listed twice", h)
		}
		seen[h] = true
	}
	if len(c.Secret) < 16 {
		return fmt.Errorf("netio: secret of %d bytes, want at least 16", len(c.Secret))
	}
	if c.ID == 0 {
		c.ID = rand.Uint64() | 1
	}
	if c.MaxPending == 0 {
		c.MaxPending = 1 << 20
	}
	if c.FrameMsgs == 0 {
		c.FrameMsgs = 2048
	}
	if c.QueueBytes == 0 {
		c.QueueBytes = 256 << 10
	}
	if c.MaxFrame == 0 {
		c.MaxFrame = DefaultMaxFrame
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.BackoffMin == 0 {
		c.BackoffMin = 50 * time.Millisecond
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = 5 * time.Second
	}
	if c.HashKey == 0 {
		sum := sha256.Sum256(append([]byte("xorack-netio-route"), c.Secret...))
		c.HashKey = binary.LittleEndian.Uint64(sum[:])
	}
	switch {
	case c.MaxPending < 1:
		return fmt.Errorf("netio: MaxPending %d below 1", c.MaxPending)
	case c.MaxFrame < MinMaxFrame || c.MaxFrame > 64<<20:
		return fmt.Errorf("netio: MaxFrame %d out of range [%d, %d]", c.MaxFrame, MinMaxFrame, 64<<20)
	case c.FrameMsgs < 1 || c.FrameMsgs > MaxMsgsPerFrame(MinMaxFrame)*16:
		return fmt.Errorf("netio: FrameMsgs %d out of range [1, %d]", c.FrameMsgs, MaxMsgsPerFrame(MinMaxFrame)*16)
	case c.QueueBytes < HeaderSize+c.FrameMsgs*MsgSize:
		return fmt.Errorf("netio: QueueBytes %d holds less than one frame of %d messages", c.QueueBytes, c.FrameMsgs)
	case c.DialTimeout < 0 || c.WriteTimeout < 0 || c.BackoffMin < 0 || c.BackoffMax < c.BackoffMin:
		return fmt.Errorf("netio: bad timeouts (dial %v, write %v, backoff %v..%v)", c.DialTimeout, c.WriteTimeout, c.BackoffMin, c.BackoffMax)
	}
	if c.Logger == nil {
		c.Logger = slog.New(warnOnly{slog.Default().Handler()})
	}
	return nil
}

// Port opens a remote acker for spec: it is Dial, with the signature an
// engine's configuration takes.
// On error the Port is a nil interface, not one holding a nil *Client.
func (c ClientConfig) Port(spec acker.Spec) (acker.Port, error) {
	cl, err := Dial(c, spec)
	if err != nil {
		return nil, err
	}
	return cl, nil
}

// ClientStats are a client's counters.
type ClientStats struct {
	Sent        uint64 // messages handed to a connection
	Lost        uint64 // roots failed with ReasonLost (a host lost, or none up)
	Stale       uint64 // outcomes for roots no longer tracked (already failed as lost)
	Dropped     uint64 // ACK, FAIL or RESET with no host up (their roots are failed as lost)
	Reconnects  uint64 // connections established after the first, all hosts
	HostsUp     int
	InFlight    int64  // roots sent whose outcome was not yet taken
	Connections uint64 // connections established, all hosts
	// ConnectFailures counts the connection attempts that failed (dial,
	// TLS or handshake), all hosts.
	ConnectFailures uint64
}

// Client is a remote acker: an acker.Port whose shards live in ackerd
// servers. See the package doc.
type Client struct {
	cfg    ClientConfig
	spec   acker.Spec
	recvOf []uint32
	hosts  []*host
	live   atomic.Pointer[[]*host] // hosts up, by index order
	liveMu sync.Mutex              // serialises updates of live
	send   []*Sender
	inbox  []*Inbox
	log    *slog.Logger
	// logEvery rate-limits each host's warnings (LogInterval on the
	// default logger, 0: every one): immutable after Dial.
	logEvery time.Duration
	epoch    time.Time
	frame    int // FrameMsgs, bounded by the smallest server frame

	inflight    atomic.Int64
	slotWaiters atomic.Int32
	slotMu      sync.Mutex
	slotCond    *sync.Cond

	closed   atomic.Bool
	stopOnce sync.Once
	stopped  chan struct{}
	wg       sync.WaitGroup

	local          outCounts // outcomes a sender failed locally
	dropped, conns atomic.Uint64
}

// sendCounts are one sender's counters: written by its goroutine (an
// atomic add on a line no other goroutine writes is cheap), summed by
// Stats.
type sendCounts struct {
	_     [layout.CacheLine]byte
	kinds [4]atomic.Uint64 // messages sent by kind, index Kind&3 (RESET 0)
	sent  atomic.Uint64    // messages handed to a connection
	_     [layout.CacheLine - 40]byte
}

// outCounts count delivered outcomes: one set per host (its reader and
// its loss), one for the senders' local failures; summed by Stats.
type outCounts struct {
	_                                                        [layout.CacheLine]byte
	completed, explicit, timeout, full, stopped, lost, stale atomic.Uint64
	_                                                        [layout.CacheLine - 56]byte
}

// Dial opens a remote acker for spec on the hosts of cfg. It connects to
// every host in the background and returns once each has connected or
// failed its first attempt; it fails if none connected.
func Dial(cfg ClientConfig, spec acker.Spec) (*Client, error) {
	var logEvery time.Duration
	if cfg.Logger == nil {
		logEvery = LogInterval
	}
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	spec, recvOf, err := spec.Check()
	if err != nil {
		return nil, fmt.Errorf("netio: %w", err)
	}
	if uint64(cfg.TaskBase)+uint64(spec.Tasks) > ackcore.MaxTask+1 {
		return nil, fmt.Errorf("netio: tasks [%d, %d) exceed MaxTask %d", cfg.TaskBase, uint64(cfg.TaskBase)+uint64(spec.Tasks), ackcore.MaxTask)
	}
	c := &Client{cfg: cfg, spec: spec, recvOf: recvOf, log: cfg.Logger, logEvery: logEvery, epoch: time.Now(),
		stopped: make(chan struct{}), frame: cfg.FrameMsgs}
	c.slotCond = sync.NewCond(&c.slotMu)
	for r := 0; r < spec.Receivers; r++ {
		ib := &Inbox{c: c, wake: make(chan struct{}, 1), max: cfg.MaxPending}
		ib.cond = sync.NewCond(&ib.mu)
		c.inbox = append(c.inbox, ib)
	}
	empty := []*host{}
	c.live.Store(&empty)
	first := make(chan error, len(cfg.Hosts))
	for i, addr := range cfg.Hosts {
		h := &host{c: c, idx: i, addr: addr, key: hostKey(addr)}
		h.cond = sync.NewCond(&h.mu)
		c.hosts = append(c.hosts, h)
	}
	for p := 0; p < spec.Producers; p++ {
		s := &Sender{c: c, stage: make([]stage, len(c.hosts))}
		c.send = append(c.send, s)
	}
	for _, h := range c.hosts {
		c.wg.Add(1)
		go h.run(first)
	}
	up := 0
	ce := &ConnectError{}
	for range c.hosts {
		if err := <-first; err != nil {
			ce.Hosts = append(ce.Hosts, err.(*HostError))
		} else {
			up++
		}
	}
	if up == 0 {
		c.Stop()
		slices.SortFunc(ce.Hosts, func(a, b *HostError) int { return strings.Compare(a.Addr, b.Addr) })
		return nil, ce
	}
	return c, nil
}

// ConnectError is Dial's error when no host connected: each host's
// reason, in address order.
type ConnectError struct {
	Hosts []*HostError
}

func (e *ConnectError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "netio: could not connect to any of %d hosts: ", len(e.Hosts))
	for i, h := range e.Hosts {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(h.Error())
	}
	return b.String()
}

// Unwrap returns the hosts' errors, for errors.Is and errors.As.
func (e *ConnectError) Unwrap() []error {
	errs := make([]error, len(e.Hosts))
	for i, h := range e.Hosts {
		errs[i] = h
	}
	return errs
}

// HostError is why a connection attempt to one host failed: "connection
// refused", the TLS handshake's error, the server's close reason with its
// code ("hello MAC does not match (handshake refused, code auth)"), a
// frame of another protocol version.
type HostError struct {
	Addr string
	Err  error
}

func (e *HostError) Error() string { return e.Addr + ": " + e.Err.Error() }
func (e *HostError) Unwrap() error { return e.Err }

// refusedError is a server's close frame read in the handshake: its code
// and the text the client reports.
type refusedError struct {
	code uint16
	text string
}

func (e *refusedError) Error() string { return e.text }

// busy reports whether err is a server's refusal for lack of room
// (CloseOverloaded), which a retry may get past.
func busy(err error) bool {
	var r *refusedError
	return errors.As(err, &r) && r.code == CloseOverloaded
}

// closeCodeName names a close code for an error text.
func closeCodeName(code uint16) string {
	names := [...]string{CloseNormal: "normal", CloseShutdown: "shutdown", CloseAuth: "auth", CloseProtocol: "protocol",
		CloseTaskOwned: "task_owned", CloseSlow: "slow", CloseReplaced: "replaced", CloseIdle: "idle", CloseOverloaded: "overloaded"}
	if int(code) < len(names) {
		return names[code]
	}
	return strconv.Itoa(int(code))
}

// warnOnly passes on warnings and errors only: the default logger says
// what went wrong, not every connection made.
type warnOnly struct{ slog.Handler }

func (w warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}
func (w warnOnly) WithAttrs(as []slog.Attr) slog.Handler { return warnOnly{w.Handler.WithAttrs(as)} }
func (w warnOnly) WithGroup(g string) slog.Handler       { return warnOnly{w.Handler.WithGroup(g)} }

// Sender returns send handle i (acker.Port).
func (c *Client) Sender(i int) acker.Sender { return c.send[i] }

// Inbox returns outcome inbox r (acker.Port).
func (c *Client) Inbox(r int) acker.Inbox { return c.inbox[r] }

// Producer is Sender with its concrete type.
func (c *Client) Producer(i int) *Sender { return c.send[i] }

// Receiver is Inbox with its concrete type.
func (c *Client) Receiver(r int) *Inbox { return c.inbox[r] }

// TaskInbox is the inbox of spout task t's outcomes.
func (c *Client) TaskInbox(t int) *Inbox { return c.inbox[c.recvOf[t]] }

var (
	_ acker.Port   = (*Client)(nil)
	_ acker.Sender = (*Sender)(nil)
	_ acker.Inbox  = (*Inbox)(nil)
)

// Stats returns the client's counters as the acker's (sent by kind,
// outcomes by kind; Pending is the roots in flight) and its own.
func (c *Client) Stats() (ackcore.Stats, ClientStats) {
	st := ackcore.Stats{Pending: int(c.inflight.Load())}
	var fails uint64
	for _, h := range c.hosts {
		fails += h.fails.Load()
	}
	cs := ClientStats{Dropped: c.dropped.Load(), HostsUp: len(*c.live.Load()), InFlight: c.inflight.Load()}
	for _, s := range c.send {
		st.Resets += s.cnt.kinds[0].Load()
		st.Inits += s.cnt.kinds[ackcore.Init].Load()
		st.Acks += s.cnt.kinds[ackcore.Ack].Load()
		st.Fails += s.cnt.kinds[ackcore.Fail].Load()
		cs.Sent += s.cnt.sent.Load()
	}
	oc := []*outCounts{&c.local}
	for _, h := range c.hosts {
		oc = append(oc, &h.cnt)
	}
	for _, o := range oc {
		st.Completed += o.completed.Load()
		st.FailedExplicit += o.explicit.Load()
		st.FailedTimeout += o.timeout.Load()
		st.FailedFull += o.full.Load()
		st.FailedStopped += o.stopped.Load()
		cs.Lost += o.lost.Load()
		cs.Stale += o.stale.Load()
	}
	n := c.conns.Load()
	cs.Connections = n
	cs.ConnectFailures = fails
	if n > uint64(len(c.hosts)) {
		cs.Reconnects = n - uint64(len(c.hosts))
	}
	return st, cs
}

// Stop closes the remote acker: sends fail from now on; every root sent
// whose outcome has not arrived is reported Failed{stopped} to its inbox
// (a root a sender staged but never handed over is reported so by that
// sender's next Send or Flush, which return acker.ErrClosed). Stop does
// not wait for the inboxes to be read: what they hold stays there for
// Poll and Wait, and Wait returns false once an inbox is closed and
// empty. It returns the final counters.
func (c *Client) Stop() ackcore.Stats {
	c.stopOnce.Do(func() {
		c.closed.Store(true)
		close(c.stopped)
		for _, ib := range c.inbox {
			ib.stopping() // readers stop waiting for room: nothing more is sent
		}
		c.slotMu.Lock()
		c.slotCond.Broadcast() // senders waiting for a slot see closed
		c.slotMu.Unlock()
		for _, h := range c.hosts {
			h.hangUp()
		}
		c.wg.Wait()
		// INITs a sender staged and never handed over are failed by that
		// sender, on its goroutine, at its next Send or Flush.
		for _, ib := range c.inbox {
			ib.close()
		}
	})
	st, _ := c.Stats()
	return st
}

// acquire takes a slot for a root in flight, waiting at MaxPending unless
// !wait; s's staged frames are handed over first, so that the roots they
// finish can free slots.
func (c *Client) acquire(s *Sender, wait bool) bool {
	if c.tryAcquire(1) {
		return true
	}
	if !wait {
		return false
	}
	for i := range s.stage {
		if s.stage[i].n > 0 {
			s.handOver(c.hosts[i])
		}
	}
	c.slotMu.Lock()
	defer c.slotMu.Unlock()
	c.slotWaiters.Add(1)
	defer c.slotWaiters.Add(-1)
	for {
		// Under slotMu: a waiter's own brief add cannot hide a slot
		// from another waiter, and one it hides from a sender outside
		// makes that sender broadcast (tryAcquire) or wait here.
		if c.inflight.Add(1) <= int64(c.cfg.MaxPending) {
			return true
		}
		c.inflight.Add(-1)
		if c.closed.Load() {
			return false
		}
		c.slotCond.Wait()
	}
}

// tryAcquire takes n slots at once if they are free. A failed attempt
// undoes its add; a waiter that saw the count it briefly raised is woken,
// so that the undo is never a lost release.
func (c *Client) tryAcquire(n int) bool {
	if c.inflight.Add(int64(n)) <= int64(c.cfg.MaxPending) {
		return true
	}
	c.inflight.Add(-int64(n))
	if c.slotWaiters.Load() > 0 {
		c.slotMu.Lock()
		c.slotCond.Broadcast()
		c.slotMu.Unlock()
	}
	return false
}

// release frees n slots (their outcomes arrived).
func (c *Client) release(n int) {
	c.inflight.Add(-int64(n))
	if c.slotWaiters.Load() > 0 {
		c.slotMu.Lock()
		c.slotCond.Broadcast()
		c.slotMu.Unlock()
	}
}

// hostKey is a host's rendezvous identity: its address, hashed.
func hostKey(addr string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(addr))
	return splitmix.Mix64(h.Sum64())
}

// pick returns the host root goes to among hosts: the highest keyed
// rendezvous score (highest random weight). When a host leaves, only its
// roots move, each to the host with its next score; nil when hosts is
// empty.
func pick(hosts []*host, key, root uint64) *host {
	if len(hosts) == 1 {
		return hosts[0]
	}
	r := splitmix.Mix64(root ^ key)
	var best *host
	var bs uint64
	for _, h := range hosts {
		if s := splitmix.Mix64(r ^ h.key); best == nil || s > bs {
			best, bs = h, s
		}
	}
	return best
}

// setLive recomputes the hosts up.
func (c *Client) setLive() {
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	var up []*host
	for _, h := range c.hosts {
		if h.up.Load() {
			up = append(up, h)
		}
	}
	c.live.Store(&up)
}

// initRec is a staged or queued INIT: root, local task, and, once the
// writer took it, its send time (ms since the client's epoch; 0 before).
type initRec struct {
	root uint64
	task uint32
	ms   uint32
}

// stage is one sender's frame under construction for one host. Its
// buffer stays with the sender: a hand-over copies the frame into the
// host's outbound buffer.
type stage struct {
	buf   []byte // a msgs frame header, then n records
	n     int
	inits []initRec
}

// Sender is one send handle (acker.Sender): it stages messages per host
// and hands a host's frame to its connection when it holds FrameMsgs
// messages or on Flush. One goroutine uses it.
type Sender struct {
	c     *Client
	stage []stage
	// messages staged since the last Flush by kind, index Kind&3 (INIT
	// 1, ACK 2, FAIL 3, RESET 0), added to the client's counters at Flush
	kinds [4]uint64
	cnt   sendCounts
}

// Send stages m for its root's host, handing the frame over when full.
// An INIT waits while MaxPending roots are in flight. With no host up,
// an INIT is reported Failed{acker lost} at once and other messages are
// dropped (counted). A malformed message returns an error naming the
// value, and acker.ErrClosed once the client is stopped.
func (s *Sender) Send(m ackcore.Msg) error {
	_, err := s.send(m, true)
	return err
}

// TrySend is Send without waiting: false when MaxPending roots are in
// flight or m's host's queue is full.
func (s *Sender) TrySend(m ackcore.Msg) (bool, error) { return s.send(m, false) }

// SendBatch is Send for each of msgs in order. With one host up it
// stages runs of messages at once: one check of the client's state, one
// take of root slots for a run's INITs, and an encoding loop per run; a
// run that would pass MaxPending, and every message with several hosts
// up (each routed by its root), go through Send one at a time.
func (s *Sender) SendBatch(msgs []ackcore.Msg) error {
	c := s.c
	for len(msgs) > 0 {
		live := *c.live.Load()
		if len(live) != 1 || c.closed.Load() {
			if _, err := s.send(msgs[0], true); err != nil {
				return err
			}
			msgs = msgs[1:]
			continue
		}
		h := live[0]
		st := &s.stage[h.idx]
		run := msgs[:min(len(msgs), c.frame-st.n)]
		inits := 0
		for i := range run {
			if !s.valid(&run[i]) {
				run = run[:i]
				break
			}
			if run[i].Kind == ackcore.Init {
				inits++
			}
		}
		if len(run) == 0 || inits > 0 && !c.tryAcquire(inits) {
			// A malformed message (send names it), or no room for the
			// run's roots (send waits for it).
			if _, err := s.send(msgs[0], true); err != nil {
				return err
			}
			msgs = msgs[1:]
			continue
		}
		s.putRun(st, run)
		msgs = msgs[len(run):]
		if st.n >= c.frame {
			s.handOver(h)
		}
	}
	return nil
}

// valid reports whether m may be sent: a well-formed message whose INIT
// names one of the client's tasks (invalid says why not).
func (s *Sender) valid(m *ackcore.Msg) bool {
	return m.Root != 0 && m.Kind-ackcore.Init <= ackcore.Reset-ackcore.Init && m.TimeoutMs <= maxTimeoutMs &&
		(m.Kind != ackcore.Init || m.Task < uint32(s.c.spec.Tasks))
}

func (s *Sender) invalid(m *ackcore.Msg) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("netio: %w", err)
	}
	return fmt.Errorf("netio: INIT root %#x names task %d, the client has %d tasks", m.Root, m.Task, s.c.spec.Tasks)
}

func (s *Sender) send(m ackcore.Msg, wait bool) (bool, error) {
	c := s.c
	if c.closed.Load() {
		s.abandon()
		return false, acker.ErrClosed
	}
	if !s.valid(&m) {
		return false, s.invalid(&m)
	}
	live := *c.live.Load()
	h := pick(live, c.cfg.HashKey, m.Root)
	if h != nil && !wait && s.stage[h.idx].n+1 >= c.frame && h.full() {
		return false, nil
	}
	if m.Kind == ackcore.Init {
		if !c.acquire(s, wait) {
			if c.closed.Load() {
				return false, acker.ErrClosed
			}
			return false, nil
		}
	}
	if h == nil {
		if m.Kind == ackcore.Init {
			c.failLocal([]initRec{{root: m.Root, task: m.Task}}, ackcore.ReasonLost)
		} else {
			c.dropped.Add(1)
		}
		return true, nil
	}
	st := &s.stage[h.idx]
	s.put(st, &m)
	if st.n >= c.frame {
		s.handOver(h)
	}
	return true, nil
}

// put appends m's record to st (m valid, its root's slot taken if an
// INIT). The stage's buffer holds a whole frame from its first use on, so
// the append never reallocates.
func (s *Sender) put(st *stage, m *ackcore.Msg) {
	if st.n == 0 {
		if cap(st.buf) < HeaderSize+s.c.frame*MsgSize {
			st.buf = make([]byte, 0, HeaderSize+s.c.frame*MsgSize)
		}
		st.buf = appendHeader(st.buf[:0], TypeMsgs, 0)
	}
	task := uint32(0)
	if m.Kind == ackcore.Init {
		task = m.Task + s.c.cfg.TaskBase
		st.inits = append(st.inits, initRec{root: m.Root, task: m.Task})
	}
	s.kinds[m.Kind&3]++
	off := len(st.buf)
	st.buf = st.buf[:off+MsgSize]
	r := st.buf[off : off+MsgSize : off+MsgSize]
	binary.LittleEndian.PutUint64(r[offMsgRoot:], m.Root)
	binary.LittleEndian.PutUint64(r[offMsgVal:], m.Val)
	binary.LittleEndian.PutUint32(r[offMsgKind:], uint32(m.Kind)<<24|task)
	binary.LittleEndian.PutUint32(r[offMsgTimeout:], m.TimeoutMs)
	st.n++
}

// putRun is put for each of run, in one loop that keeps the stage's
// buffer in registers (run fits in the stage's frame).
func (s *Sender) putRun(st *stage, run []ackcore.Msg) {
	if st.n == 0 {
		if cap(st.buf) < HeaderSize+s.c.frame*MsgSize {
			st.buf = make([]byte, 0, HeaderSize+s.c.frame*MsgSize)
		}
		st.buf = appendHeader(st.buf[:0], TypeMsgs, 0)
	}
	base := s.c.cfg.TaskBase
	buf, inits := st.buf, st.inits
	off := len(buf)
	buf = buf[:off+len(run)*MsgSize]
	for i := range run {
		m := &run[i]
		task := uint32(0)
		if m.Kind == ackcore.Init {
			task = m.Task + base
			inits = append(inits, initRec{root: m.Root, task: m.Task})
		}
		s.kinds[m.Kind&3]++ // Reset (4) counts in slot 0; see Flush
		r := buf[off+i*MsgSize:]
		r = r[:MsgSize:MsgSize]
		binary.LittleEndian.PutUint64(r[offMsgRoot:], m.Root)
		binary.LittleEndian.PutUint64(r[offMsgVal:], m.Val)
		binary.LittleEndian.PutUint32(r[offMsgKind:], uint32(m.Kind)<<24|task)
		binary.LittleEndian.PutUint32(r[offMsgTimeout:], m.TimeoutMs)
	}
	st.buf, st.inits, st.n = buf, inits, st.n+len(run)
}

// abandon fails the INITs staged when the client stopped.
func (s *Sender) abandon() {
	for i := range s.stage {
		st := &s.stage[i]
		s.c.failLocal(st.inits, ackcore.ReasonStopped)
		st.inits, st.n, st.buf = st.inits[:0], 0, st.buf[:0]
	}
}

// Flush hands every staged frame to its host's connection.
func (s *Sender) Flush() error {
	c := s.c
	if c.closed.Load() {
		s.abandon()
		return acker.ErrClosed
	}
	for i := range s.stage {
		if s.stage[i].n > 0 {
			s.handOver(c.hosts[i])
		}
	}
	if k := &s.kinds; k[0]|k[1]|k[2]|k[3] != 0 {
		for i, n := range k {
			if n > 0 {
				s.cnt.kinds[i].Add(n)
			}
		}
		*k = [4]uint64{}
	}
	if c.closed.Load() {
		return acker.ErrClosed
	}
	return nil
}

// handOver queues the stage's frame and its INITs on h (waiting for
// room), in one step under h's lock: a host lost before that fails them
// here, one lost after fails them from its queue or its pending table.
func (s *Sender) handOver(h *host) {
	st := &s.stage[h.idx]
	binary.LittleEndian.PutUint32(st.buf[offLength:], uint32(len(st.buf)))
	n := st.n
	if !h.enqueue(st.buf, st.inits) {
		reason := ackcore.ReasonLost
		if s.c.closed.Load() {
			reason = ackcore.ReasonStopped
		}
		s.c.failLocal(st.inits, reason)
		s.c.dropped.Add(uint64(n - len(st.inits)))
	} else {
		s.cnt.sent.Add(uint64(n))
	}
	st.buf, st.n, st.inits = st.buf[:0], 0, st.inits[:0]
}

// failLocal reports roots in flight as failed with reason, straight to
// their inboxes (their slots are already taken).
func (c *Client) failLocal(inits []initRec, reason ackcore.Reason) {
	c.fail(inits, reason, &c.local, true)
}

// fail reports roots in flight as failed with reason, counted in oc.
// With !wait it does not wait for room in their inboxes (a writer, which
// their consumer may be waiting on, fails so): an inbox then holds more
// than its bound, by at most the roots in flight.
func (c *Client) fail(inits []initRec, reason ackcore.Reason, oc *outCounts, wait bool) {
	if len(inits) == 0 {
		return
	}
	now := time.Since(c.epoch)
	outs := make([]ackcore.Outcome, len(inits))
	for i, r := range inits {
		outs[i] = ackcore.Outcome{Root: r.root, Task: r.task, Kind: ackcore.Failed, Reason: reason}
		if r.ms != 0 {
			outs[i].Latency = now - time.Duration(r.ms)*time.Millisecond
		}
	}
	c.deliverWait(outs, oc, wait)
}

// deliver hands outcomes of roots in flight to their inboxes and counts
// them in oc.
func (c *Client) deliver(outs []ackcore.Outcome, oc *outCounts) { c.deliverWait(outs, oc, true) }

// deliverWait is deliver that, with !wait, does not wait for room in the
// inboxes.
func (c *Client) deliverWait(outs []ackcore.Outcome, oc *outCounts, wait bool) {
	var done, expl, to, full, stop, lost uint64
	for i := range outs {
		o := &outs[i]
		if o.Kind == ackcore.Completed {
			done++
			continue
		}
		switch o.Reason {
		case ackcore.ReasonExplicit:
			expl++
		case ackcore.ReasonTimeout:
			to++
		case ackcore.ReasonFull:
			full++
		case ackcore.ReasonStopped:
			stop++
		case ackcore.ReasonLost:
			lost++
		}
	}
	c.release(len(outs))
	for _, a := range [...]struct {
		n uint64
		c *atomic.Uint64
	}{{done, &oc.completed}, {expl, &oc.explicit}, {to, &oc.timeout}, {full, &oc.full}, {stop, &oc.stopped}, {lost, &oc.lost}} {
		if a.n > 0 {
			a.c.Add(a.n)
		}
	}
	if len(c.inbox) == 1 {
		c.inbox[0].put(outs, wait)
		return
	}
	// Group by inbox; a batch usually has few.
	for len(outs) > 0 {
		r := c.recvOf[outs[0].Task]
		ib := c.inbox[r]
		k := 0
		rest := outs[:0:0]
		for _, o := range outs {
			if c.recvOf[o.Task] == r {
				outs[k] = o
				k++
			} else {
				rest = append(rest, o)
			}
		}
		ib.put(outs[:k], wait)
		outs = rest
	}
}

// Inbox is one outcome inbox (acker.Inbox). Hosts' readers put into it;
// one goroutine takes from it. It holds at most MaxPending outcomes (a
// reader waits for room), more only for a batch that came at once, or
// once Stop began (then at most the roots still in flight, each failed
// once). A put
// wakes the consumer only when it waits (sleeping), so a consumer that
// polls costs the readers no channel operation.
type Inbox struct {
	c        *Client
	n        atomic.Int64 // len(q), read without the lock by Poll
	mu       sync.Mutex
	cond     *sync.Cond        // readers waiting for room
	q        []ackcore.Outcome // guarded by mu
	max      int
	waits    int         // guarded by mu: goroutines waiting on cond
	sleeping bool        // guarded by mu: the consumer waits on wake
	closed   atomic.Bool // Stop ended: nothing more is put
	wake     chan struct{}
}

func (ib *Inbox) put(outs []ackcore.Outcome, wait bool) {
	ib.mu.Lock()
	for wait && len(ib.q) >= ib.max && !ib.c.closed.Load() { // once Stop began, puts never wait
		ib.waits++
		ib.cond.Wait()
		ib.waits--
	}
	ib.q = append(ib.q, outs...)
	ib.n.Store(int64(len(ib.q)))
	wake := ib.sleeping
	ib.sleeping = false
	ib.mu.Unlock()
	if wake {
		ib.signal()
	}
}

func (ib *Inbox) signal() {
	select {
	case ib.wake <- struct{}{}:
	default:
	}
}

// stopping wakes the readers waiting for room: Stop began (the client is
// closed), so puts no longer wait, and Stop never waits on a consumer
// that stopped reading.
func (ib *Inbox) stopping() {
	ib.mu.Lock()
	ib.cond.Broadcast()
	ib.mu.Unlock()
}

// close marks the end of the outcomes: Wait returns false once the
// consumer took what is left.
func (ib *Inbox) close() {
	ib.mu.Lock()
	ib.closed.Store(true)
	ib.mu.Unlock()
	ib.signal()
}

// Poll appends the outcomes available now to dst, without waiting.
func (ib *Inbox) Poll(dst []ackcore.Outcome) []ackcore.Outcome {
	if ib.n.Load() == 0 {
		return dst
	}
	ib.mu.Lock()
	dst = append(dst, ib.q...)
	ib.q = ib.q[:0]
	ib.n.Store(0)
	if ib.waits > 0 {
		ib.cond.Broadcast()
	}
	ib.mu.Unlock()
	return dst
}

// Wait appends at least one outcome to dst, waiting for it; ok is false
// once the client has stopped and every outcome was taken.
func (ib *Inbox) Wait(dst []ackcore.Outcome) ([]ackcore.Outcome, bool) {
	return ib.WaitUntil(dst, nil)
}

// WaitUntil is Wait that also returns, with what it has (possibly
// nothing), when wake fires.
func (ib *Inbox) WaitUntil(dst []ackcore.Outcome, wake <-chan time.Time) ([]ackcore.Outcome, bool) {
	for {
		n := len(dst)
		if dst = ib.Poll(dst); len(dst) > n {
			return dst, true
		}
		ib.mu.Lock()
		if len(ib.q) > 0 {
			ib.mu.Unlock()
			continue
		}
		if ib.closed.Load() {
			ib.mu.Unlock()
			return dst, false
		}
		ib.sleeping = true
		ib.mu.Unlock()
		select {
		case <-ib.wake:
		case <-wake:
			return ib.Poll(dst), true
		}
	}
}

// A pending-table value packs the root's local task (20 bits, up to
// ackcore.MaxTask), how many of its INITs await an outcome (12 bits: a
// root id reused before its earlier outcome came back), and the INIT's
// send time in ms since the client started (32 bits, for the latency of
// a lost root).
const (
	pendTaskMask   = ackcore.MaxTask
	pendCountShift = 20
	pendMaxCount   = 1<<12 - 1
	pendMsShift    = 32
)

func pendCount(v uint64) int { return int(v >> pendCountShift & pendMaxCount) }

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
				// handshake for a newer one): Dial tries again within
				// its dial timeout rather than fail at once.
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
func (h *host) connect() (net.Conn, *FrameReader, Welcome, error) {
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
		return nil, nil, Welcome{}, err
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	fail := func(err error) (net.Conn, *FrameReader, Welcome, error) {
		conn.Close()
		return nil, nil, Welcome{}, err
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
	fr := NewFrameReader(nc, HandshakeMaxFrame)
	f, err := fr.Next()
	if err != nil {
		return fail(fmt.Errorf("reading challenge: %w", unprefixed(err)))
	}
	if f.Type == TypeClose {
		code, reason, _ := DecodeClose(f.Body)
		return fail(&refusedError{code: code, text: fmt.Sprintf("%s (connection refused, code %s)", reason, closeCodeName(code))})
	}
	if f.Type != TypeChallenge {
		return fail(fmt.Errorf("sent %s, want challenge", typeName(f.Type)))
	}
	ch, err := DecodeChallenge(f.Body)
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
	hello := Hello{ClientID: c.cfg.ID, MaxFrame: uint32(c.cfg.MaxFrame),
		Tasks: []TaskRange{{First: c.cfg.TaskBase, Count: uint32(c.spec.Tasks)}}}
	hello.MAC = HelloMAC(c.cfg.Secret, &ch.Nonce, &hello)
	if _, err := nc.Write(AppendHello(nil, &hello)); err != nil {
		return fail(fmt.Errorf("writing hello: %w", err))
	}
	f, err = fr.Next()
	if err != nil {
		return fail(fmt.Errorf("reading welcome: %w", unprefixed(err)))
	}
	if f.Type == TypeClose {
		code, reason, _ := DecodeClose(f.Body)
		return fail(&refusedError{code: code, text: fmt.Sprintf("%s (handshake refused, code %s)", reason, closeCodeName(code))})
	}
	if f.Type != TypeWelcome {
		return fail(fmt.Errorf("sent %s, want welcome", typeName(f.Type)))
	}
	w, err := DecodeWelcome(f.Body)
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
func (h *host) serve(conn net.Conn, fr *FrameReader, w Welcome, up func()) string {
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
		_, _ = conn.Write(AppendClose(nil, CloseNormal, "client stopping"))
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
func (h *host) read(conn net.Conn, fr *FrameReader, idle time.Duration) string {
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
		case TypeOutcomes:
			if outs, err = h.resolve(outs, f.Body); err != nil {
				return err.Error()
			}
			if len(outs) >= deliverAt {
				h.c.deliver(outs, &h.cnt)
				outs = outs[:0]
			}
		case TypeHeartbeat:
		case TypeClose:
			code, reason, err := DecodeClose(f.Body)
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
	for {
		h.mu.Lock()
		if h.gen != gen {
			h.mu.Unlock()
			return
		}
		var buf []byte
		var inits []initRec
		if len(h.out) == 0 {
			h.writerIdle = true
			h.mu.Unlock()
			t.Reset(hb) // go1.23+: Reset drains a fired timer
			select {
			case <-wake:
				continue
			case <-t.C:
				buf, inits = AppendHeartbeat(spare[:0]), spareInits[:0]
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
