package netio

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/layout"
	"github.com/xorack/xorack/internal/outq"
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
	// engine's max spout pending below it. Default DefaultMaxPending.
	MaxPending int
	// FrameMsgs is the messages a sender stages per host before it hands
	// a frame to the connection (Flush hands over fewer). Default
	// DefaultFrameMsgs.
	FrameMsgs int
	// QueueBytes bounds each host's send queue; a sender waits while it
	// is full (backpressure). Default DefaultQueueBytes.
	QueueBytes int
	// MaxFrame is the largest frame the client accepts (default
	// DefaultMaxFrame).
	MaxFrame int
	// DialTimeout bounds a connection attempt, handshake included
	// (default DefaultDialTimeout). Port waits up to this long for the first attempt at
	// every host and fails if none connected; a host that refuses for
	// lack of room (closeOverloaded: at MaxConns, or a handshake dropped
	// for a newer one under a connection flood) or because another
	// client's connection still owns a task (closeTaskOwned: the server
	// has not yet seen an earlier process of these tasks go) is tried
	// again every BackoffMin within that time before it counts as failed.
	DialTimeout time.Duration
	// WriteTimeout gives a host up when its socket takes no bytes for
	// this long (default DefaultWriteTimeout).
	WriteTimeout time.Duration
	// BackoffMin and BackoffMax bound the wait between reconnect attempts
	// to a host, doubled after each failure with jitter (default
	// DefaultBackoffMin and DefaultBackoffMax).
	BackoffMin, BackoffMax time.Duration
	// MaxBytes is the client's memory budget: the most its pending
	// tables, send queues, read buffers, staged frames and inboxes may
	// hold together (0: DefaultClientMaxBytes). Dial fails, naming the
	// bytes, for a configuration that could hold more: each inbox may
	// hold up to MaxPending outcomes, so a spec of many inboxes wants a
	// smaller MaxPending or a deliberate MaxBytes.
	MaxBytes int64
	// HashKey keys the routing hash; 0 derives it from Secret, so that
	// clients sharing a secret agree.
	HashKey uint64
	// Logger receives connection events (connected, cannot connect, host
	// lost), every one. nil logs what went wrong, and only that, to
	// slog.Default (the log package's stderr unless the program set
	// another): a host's warnings at most once a minute, the next
	// one saying how many were held back.
	Logger *slog.Logger
}

// Defaults of ClientConfig (its WriteTimeout's is DefaultWriteTimeout).
const (
	// DefaultMaxPending is MaxPending's default: roots in flight, and
	// outcomes an inbox holds.
	DefaultMaxPending = 1 << 20
	// DefaultFrameMsgs is FrameMsgs' default: a 48 KiB frame.
	DefaultFrameMsgs = 2048
	// DefaultQueueBytes is QueueBytes' default: 256 KiB, about 11,000
	// messages; a deeper queue only adds latency once the connection is
	// saturated.
	DefaultQueueBytes = 256 << 10
	// DefaultDialTimeout is DialTimeout's default.
	DefaultDialTimeout = 5 * time.Second
	// DefaultBackoffMin and DefaultBackoffMax are BackoffMin's and
	// BackoffMax's defaults.
	DefaultBackoffMin = 50 * time.Millisecond
	DefaultBackoffMax = 5 * time.Second
)

// maxHosts is the most hosts a client may list.
const maxHosts = 1024

// logInterval is the least time between two warnings about one host on
// the default logger (ClientConfig.Logger nil): a host refusing every
// retry is reported once a minute, not at every backoff step.
const logInterval = time.Minute

// Validate reports whether c is a configuration Dial accepts before it
// looks at a spec (Dial also checks the memory budget against the
// spec's inboxes): the error Dial would return, naming the field and its
// value.
func (c ClientConfig) Validate() error {
	_, err := c.validate()
	return err
}

// validate fills every zero field of c from its default (ID: a random
// one; HashKey: derived from Secret; Logger: warnings to slog.Default)
// and checks every field: it returns the filled copy, or an error naming
// the field and its value. Dial keeps only the copy.
func (c ClientConfig) validate() (ClientConfig, error) {
	const pre = "netio: ClientConfig."
	if len(c.Hosts) == 0 {
		return c, errors.New(pre + "Hosts is empty")
	}
	if len(c.Hosts) > maxHosts {
		return c, fmt.Errorf(pre+"Hosts lists %d, at most %d", len(c.Hosts), maxHosts)
	}
	seen := make(map[string]bool, len(c.Hosts))
	for _, h := range c.Hosts {
		if seen[h] {
			return c, fmt.Errorf(pre+"Hosts lists %q twice", h)
		}
		seen[h] = true
	}
	c.Hosts = slices.Clone(c.Hosts)
	if err := validateLink(pre, c.Secret, &c.MaxFrame, &c.WriteTimeout); err != nil {
		return c, err
	}
	if c.ID == 0 {
		c.ID = rand.Uint64() | 1
	}
	c.MaxPending = cmp.Or(c.MaxPending, DefaultMaxPending)
	c.FrameMsgs = cmp.Or(c.FrameMsgs, DefaultFrameMsgs)
	c.QueueBytes = cmp.Or(c.QueueBytes, DefaultQueueBytes)
	c.DialTimeout = cmp.Or(c.DialTimeout, DefaultDialTimeout)
	c.BackoffMin = cmp.Or(c.BackoffMin, DefaultBackoffMin)
	c.BackoffMax = cmp.Or(c.BackoffMax, DefaultBackoffMax)
	c.MaxBytes = cmp.Or(c.MaxBytes, DefaultClientMaxBytes)
	if c.HashKey == 0 {
		sum := sha256.Sum256(append([]byte("xorack-netio-route"), c.Secret...))
		c.HashKey = binary.LittleEndian.Uint64(sum[:])
	}
	maxFrameMsgs := maxMsgsPerFrame(minMaxFrame) * 16
	switch {
	case c.MaxPending < 1 || c.MaxPending > maxClientPending:
		return c, fmt.Errorf(pre+"MaxPending %d out of range [1, %d]", c.MaxPending, maxClientPending)
	case c.MaxBytes < 0:
		return c, fmt.Errorf(pre+"MaxBytes %d is negative (0: DefaultClientMaxBytes)", c.MaxBytes)
	case c.FrameMsgs < 1 || c.FrameMsgs > maxFrameMsgs:
		return c, fmt.Errorf(pre+"FrameMsgs %d out of range [1, %d]", c.FrameMsgs, maxFrameMsgs)
	case c.QueueBytes < headerSize+c.FrameMsgs*msgSize:
		return c, fmt.Errorf(pre+"QueueBytes %d holds less than one frame of %d messages (%d bytes)", c.QueueBytes, c.FrameMsgs, headerSize+c.FrameMsgs*msgSize)
	case c.BackoffMax < c.BackoffMin:
		return c, fmt.Errorf(pre+"BackoffMax %v below BackoffMin %v", c.BackoffMax, c.BackoffMin)
	}
	if err := nonNegative(pre, namedDuration{"DialTimeout", c.DialTimeout}, namedDuration{"BackoffMin", c.BackoffMin}); err != nil {
		return c, err
	}
	if c.Logger == nil {
		c.Logger = slog.New(warnOnly{slog.Default().Handler()})
	}
	return c, nil
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
	send   []*producer
	inbox  []*receiver
	log    *slog.Logger
	// logEvery rate-limits each host's warnings (logInterval on the
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
		logEvery = logInterval
	}
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	spec, recvOf, err := spec.InboxTable()
	if err != nil {
		return nil, fmt.Errorf("netio: %w", err)
	}
	if uint64(cfg.TaskBase)+uint64(spec.Tasks) > ackcore.MaxTask+1 {
		return nil, fmt.Errorf("netio: tasks [%d, %d) exceed MaxTask %d", cfg.TaskBase, uint64(cfg.TaskBase)+uint64(spec.Tasks), ackcore.MaxTask)
	}
	if err := cfg.checkBudget(spec); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, spec: spec, recvOf: recvOf, log: cfg.Logger, logEvery: logEvery, epoch: time.Now(),
		stopped: make(chan struct{}), frame: cfg.FrameMsgs}
	c.slotCond = sync.NewCond(&c.slotMu)
	for r := 0; r < spec.Receivers; r++ {
		ib := &receiver{q: outq.New[ackcore.Outcome](cfg.MaxPending)}
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
		s := &producer{c: c, stage: make([]stage, len(c.hosts))}
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

// busy reports whether err is a server's refusal a retry may get past:
// for lack of room (closeOverloaded), or for a task still owned by a
// connection the server has not yet seen close (closeTaskOwned: this
// process restarted, or an earlier client of the same tasks just
// stopped; the server takes milliseconds to notice).
func busy(err error) bool {
	var r *refusedError
	return errors.As(err, &r) && (r.code == closeOverloaded || r.code == closeTaskOwned)
}

// closeCodeName names a close code for an error text.
func closeCodeName(code uint16) string {
	names := [...]string{closeNormal: "normal", closeShutdown: "shutdown", closeAuth: "auth", closeProtocol: "protocol",
		closeTaskOwned: "task_owned", closeSlow: "slow", closeReplaced: "replaced", closeIdle: "idle", closeOverloaded: "overloaded"}
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

var (
	_ acker.Port   = (*Client)(nil)
	_ acker.Sender = (*producer)(nil)
	_ acker.Inbox  = (*receiver)(nil)
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
func (c *Client) acquire(s *producer, wait bool) bool {
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
