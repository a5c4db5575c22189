package netio

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/ring"
)

// ServerConfig, its defaults and the ranges it is checked against (its
// validate; validateLink for the fields a ClientConfig shares), and the
// server's fixed timings.

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
	const pre = "netio: ServerConfig."
	if err := validateLink(pre, c.Secret, &c.MaxFrame, &c.WriteTimeout); err != nil {
		return c, err
	}
	c.Shards = cmp.Or(c.Shards, DefaultShards)
	c.Tasks = cmp.Or(c.Tasks, DefaultTasks)
	c.MaxConns = cmp.Or(c.MaxConns, DefaultMaxConns)
	c.MaxHandshakes = cmp.Or(c.MaxHandshakes, DefaultMaxHandshakes)
	def := c.Shard.Timeout
	if def == 0 {
		def = ackcore.DefaultTimeout
	}
	if c.MaxRootTimeout == 0 {
		c.MaxRootTimeout = min(rootTimeoutFactor*def, ackcore.MaxTimeout)
	}
	c.MaxConnPending = cmp.Or(c.MaxConnPending, DefaultMaxConnPending)
	c.HandshakeTimeout = cmp.Or(c.HandshakeTimeout, DefaultHandshakeTimeout)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, DefaultIdleTimeout)
	c.RingSize = cmp.Or(c.RingSize, DefaultRingSize)
	if c.ShareSlack == 0 && c.Shards > 0 && c.RingSize > 0 {
		c.ShareSlack = defaultSlackRings * c.Shards * c.RingSize
	}
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
	if err := nonNegative(pre, namedDuration{"HandshakeTimeout", c.HandshakeTimeout}); err != nil {
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

// validateLink fills and checks, by one rule for both ends, the fields a
// ServerConfig and a ClientConfig share: Secret (at least minSecretBytes),
// MaxFrame (default DefaultMaxFrame, in [minMaxFrame, maxMaxFrame]) and
// WriteTimeout (default DefaultWriteTimeout, not below 0). pre names the
// config ("netio: ServerConfig."); maxFrame and writeTimeout point into the
// copy the config's validate fills.
func validateLink(pre string, secret []byte, maxFrame *int, writeTimeout *time.Duration) error {
	if len(secret) < minSecretBytes {
		return fmt.Errorf(pre+"Secret of %d bytes, want at least %d", len(secret), minSecretBytes)
	}
	*maxFrame = cmp.Or(*maxFrame, DefaultMaxFrame)
	*writeTimeout = cmp.Or(*writeTimeout, DefaultWriteTimeout)
	if *maxFrame < minMaxFrame || *maxFrame > maxMaxFrame {
		return fmt.Errorf(pre+"MaxFrame %d out of range [%d, %d]", *maxFrame, minMaxFrame, maxMaxFrame)
	}
	return nonNegative(pre, namedDuration{"WriteTimeout", *writeTimeout})
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
