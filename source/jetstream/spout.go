package jetstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/topology"
)

// Defaults for Config's zero fields and for ConsumerConfig.
const (
	// DefaultAckWait is ConsumerConfig's AckWait: how long a crashed
	// pipeline's messages wait before the server redelivers them. Short,
	// because the spout keeps every message it holds alive with
	// InProgress; JetStream's own default (30 s) would make a crash cost
	// half a minute.
	DefaultAckWait = 5 * time.Second
	// DefaultFetchWait is how long a pull request waits at the server for
	// messages before it expires and the spout asks again: messages are
	// delivered to an open request as they arrive, so it sets the idle
	// request rate (4 a second per task) and how long Close waits for the
	// open request to run out.
	DefaultFetchWait = 250 * time.Millisecond
	// DefaultOpenTimeout bounds Open's look-up of the consumer.
	DefaultOpenTimeout = 10 * time.Second
)

// minFetchWait is the shortest Config.FetchWait: a pull request that
// expires sooner asks the server again more than a hundred times a second.
const minFetchWait = 10 * time.Millisecond

const (
	// minAckWait is the shortest AckWait the spout accepts: it sends
	// InProgress every third of it, from a goroutine that must get the CPU
	// in time on a busy machine.
	minAckWait = 100 * time.Millisecond
	// keepAliveTicks is how often per AckWait the keeper looks for held
	// messages untouched for a third of AckWait: a message is touched at
	// most AckWait/3 + AckWait/6 = AckWait/2 apart, half the deadline as
	// margin.
	keepAliveTicks = 6
	// maxFetch caps one pull request: nats.go allocates a channel of the
	// batch size per request.
	maxFetch = 1024
	// minNakDelay is the least delay of a failed attempt's Nak: a Nak
	// without a delay is redelivered at once and burns the delivery count
	// in milliseconds (nats-io/nats-server#4726).
	minNakDelay = time.Millisecond
)

// ErrDeliveryLimit is wrapped by a DeadLetter's Err for a message that
// arrived with a delivery count past the retry policy's last attempt (its
// earlier deliveries ended in a crash or an expired AckWait): it is dead-
// lettered without being processed.
var ErrDeliveryLimit = errors.New("jetstream: delivered past the retry policy's last attempt")

// Position is a message's place in its stream. An idempotent sink keys
// its writes by it, so that a redelivered message writes nothing new.
type Position struct {
	Stream string
	Seq    uint64 // the stream sequence, from 1
}

func (p Position) String() string { return fmt.Sprintf("%s/%d", p.Stream, p.Seq) }

// Config configures a Spout. JetStream, Stream and Consumer are required.
type Config struct {
	// JetStream is the client. The spout neither opens nor closes its
	// connection.
	JetStream natsjs.JetStream
	// Stream and Consumer name an existing durable pull consumer with
	// explicit acks (ConsumerConfig makes one). Several spout tasks, in
	// one process or many, may share it: the server splits its messages
	// among their pull requests.
	Stream, Consumer string
	// Decode turns a message into the values the spout emits; an error
	// dead-letters the message (it would not decode on a redelivery
	// either). Default: (Position, []byte data).
	Decode func(m natsjs.Msg, pos Position) ([]any, error)
	// DeadLetter, if set, receives each message the spout gives up on,
	// before it Terms it. It runs on the spout executor's goroutine.
	DeadLetter func(DeadLetter)
	// FetchWait is how long one pull request waits at the server;
	// default DefaultFetchWait, at least 10 ms (minFetchWait).
	FetchWait time.Duration
	// OpenTimeout bounds Open's look-up of the consumer; default
	// DefaultOpenTimeout. When the server does not answer within it, Open
	// fails with the connection's state and last error (connection
	// refused, authorization) beside the look-up's.
	OpenTimeout time.Duration
	// Logger receives the spout's reports: failed pull requests (once
	// per 10 s, with the connection's state). Nil means slog.Default().
	Logger *slog.Logger
}

// validate returns c with every zero field filled (FetchWait and
// OpenTimeout from their Default constants, Decode with defaultDecode,
// Logger with slog.Default()), or an error naming the field and the value.
func (c Config) validate() (Config, error) {
	switch {
	case c.JetStream == nil:
		return c, errors.New("jetstream: Config.JetStream is nil")
	case c.Stream == "":
		return c, fmt.Errorf("jetstream: Config.Stream %q is empty (Config.Consumer %q)", c.Stream, c.Consumer)
	case c.Consumer == "":
		return c, fmt.Errorf("jetstream: Config.Consumer %q is empty (Config.Stream %q)", c.Consumer, c.Stream)
	}
	c.FetchWait = cmp.Or(c.FetchWait, DefaultFetchWait)
	if c.FetchWait < minFetchWait {
		return c, fmt.Errorf("jetstream: Config.FetchWait %v is below %v", c.FetchWait, minFetchWait)
	}
	c.OpenTimeout = cmp.Or(c.OpenTimeout, DefaultOpenTimeout)
	if c.OpenTimeout < 0 {
		return c, fmt.Errorf("jetstream: Config.OpenTimeout %v is negative", c.OpenTimeout)
	}
	if c.Decode == nil {
		c.Decode = defaultDecode
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// defaultDecode is Config.Decode's default: the values (Position, []byte
// data).
func defaultDecode(m natsjs.Msg, pos Position) ([]any, error) { return []any{pos, m.Data()}, nil }

// DeadLetter is a message the spout gives up on. The spout Terms it after
// the hook returns, so the server never delivers it again.
type DeadLetter struct {
	Msg       natsjs.Msg
	Position  Position
	Delivered int // the server's delivery count
	// Err says why: a *topology.Failure (the last attempt failed), an
	// error wrapping ErrDeliveryLimit (delivered past the last attempt),
	// or Decode's error.
	Err error
}

// Stats are a spout's counters. Each is exact when read after Close.
type Stats struct {
	Fetched      uint64 // messages received from the server
	Emitted      uint64 // messages emitted as roots
	Acked        uint64 // trees completed: Ack
	Naked        uint64 // failed attempts handed back: Nak with the policy's delay
	NakedStopped uint64 // held at shutdown and handed back: Nak
	DeadLettered uint64 // given up: the hook, then Term
	PastLimit    uint64 // of DeadLettered: delivered past the last attempt, not processed
	InProgress   uint64 // InProgress sent for held messages
	LetGo        uint64 // held past the longest tree (ResetCap + AckWait) without a reply: no longer kept alive
	ReplyErrors  uint64 // acks of any kind that could not be sent (closed connection)
	FetchErrors  uint64 // pull requests that failed
	// LastFetchError is the last failed pull request's error, "" before
	// any; Connected says whether the connection is up now.
	LastFetchError string
	Connected      bool
	Held           int64 // messages held now: fetched and not yet answered
	HeldHigh       int64 // the most held at once
	Capacity       int64 // the most the spout holds: min(MaxSpoutPending, the consumer's MaxAckPending)
}

// ConsumerConfig returns the configuration of a durable pull consumer as
// the spout wants it: explicit acks, AckWait (DefaultAckWait when 0),
// MaxAckPending (the server's default when 0), no delivery limit at the
// server (the spout enforces the retry policy's), every message of the
// stream from the first.
func ConsumerConfig(durable string, ackWait time.Duration, maxAckPending int) natsjs.ConsumerConfig {
	if ackWait == 0 {
		ackWait = DefaultAckWait
	}
	return natsjs.ConsumerConfig{
		Durable:       durable,
		AckPolicy:     natsjs.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxAckPending: maxAckPending,
		MaxDeliver:    -1,
		DeliverPolicy: natsjs.DeliverAllPolicy,
	}
}

// Spout is a topology spout reading a JetStream pull consumer; see the
// package documentation. Make one per task (New in the Builder's
// constructor).
type Spout struct {
	cfg Config

	// Set by Open, immutable after.
	cons      natsjs.Consumer
	retry     topology.RetryPolicy
	capacity  int // the most messages held at once
	batchMax  int // the most asked for in one pull request
	ackWait   time.Duration
	maxHold   time.Duration // ResetCap + AckWait: how long a held message is kept alive at most
	epoch     time.Time
	fetchWait time.Duration

	// Owned by the executor goroutine (Next, Ack, Fail, Close).
	local   []*inflight // taken from queue, not yet emitted
	next    int         // local[next] is the next to emit
	started bool

	// mu guards queue and the keep-alive list; the pump appends to queue
	// and the list, the executor takes from queue and unlinks from the
	// list, the keeper moves list entries to the back.
	mu    sync.Mutex
	queue []*inflight // fetched, not yet taken by the executor
	list  inflight    // sentinel of the held messages, least recently touched first

	held     atomic.Int64  // added to by the pump, subtracted from by the executor
	stopping atomic.Bool   // set by the executor at shutdown: the pump asks no more
	credit   chan struct{} // executor -> pump: room freed (capacity 1, never blocks)
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{} // closed when the pump has returned

	st struct {
		fetched, emitted, acked, naked, nakedStopped, deadLettered, pastLimit,
		inProgress, letGo, replyErrors, fetchErrors atomic.Uint64
		heldHigh atomic.Int64 // written by the pump only
		lastErr  atomic.Value // string: the last pull request's error; written by the pump
	}
	lastFetchLog time.Time // the pump's
}

// inflight is one held message. msg, pos, delivered, err and arrived are
// immutable after the pump made it; touched, prev and next are guarded by
// Spout.mu.
type inflight struct {
	msg        natsjs.Msg
	pos        Position
	delivered  int
	err        error         // the metadata could not be parsed
	arrived    time.Duration // since Spout.epoch
	emitted    atomic.Int64  // since Spout.epoch, ns; 0 until emitted; written by the executor
	touched    time.Duration
	prev, next *inflight // nil while not listed
}

var _ topology.Redeliverer = (*Spout)(nil)

// New returns a spout reading the consumer cfg names. The configuration is
// checked (Config.validate) by Open, whose errors reach topology.Start:
// New runs in a Builder's spout constructor, which has no error to
// return.
func New(cfg Config) *Spout {
	s := &Spout{cfg: cfg, credit: make(chan struct{}, 1), done: make(chan struct{})}
	s.list.prev, s.list.next = &s.list, &s.list
	return s
}

// Open looks the consumer up and checks it against the topology's
// configuration.
func (s *Spout) Open(tc topology.TaskContext) error {
	cfg, err := s.cfg.validate()
	if err != nil {
		return err
	}
	s.cfg = cfg
	c := &s.cfg
	ctx, cancel := context.WithTimeout(context.Background(), c.OpenTimeout)
	defer cancel()
	cons, err := c.JetStream.Consumer(ctx, c.Stream, c.Consumer)
	if err != nil {
		if nc := c.JetStream.Conn(); nc != nil && !nc.IsConnected() {
			return fmt.Errorf("jetstream: consumer %q of stream %q, within %v (Config.OpenTimeout): %w (connection %v: %w)",
				c.Consumer, c.Stream, c.OpenTimeout, err, nc.Status(), why(nc, c.OpenTimeout))
		}
		return fmt.Errorf("jetstream: consumer %q of stream %q: %w", c.Consumer, c.Stream, err)
	}
	info := cons.CachedInfo()
	if info == nil {
		return fmt.Errorf("jetstream: consumer %q of stream %q: no info", c.Consumer, c.Stream)
	}
	top := tc.Config()
	if err := check(c.Consumer, &info.Config, &top); err != nil {
		return err
	}
	s.cons = cons
	s.retry = top.Retry
	s.ackWait = info.Config.AckWait
	s.maxHold = top.ResetCap + s.ackWait
	s.fetchWait = c.FetchWait
	s.capacity = top.MaxSpoutPending
	if m := info.Config.MaxAckPending; m > 0 {
		s.capacity = min(s.capacity, m)
	}
	s.batchMax = min(s.capacity, maxFetch)
	if m := info.Config.MaxRequestBatch; m > 0 {
		s.batchMax = min(s.batchMax, m)
	}
	s.epoch = time.Now()
	return nil
}

// why says why nc is not connected: its last error, or else what dialing
// each of its servers says (a connection retrying in the background keeps
// no error of its own), each dial bounded by a second or timeout.
func why(nc *nats.Conn, timeout time.Duration) error {
	if err := nc.LastError(); err != nil {
		return err
	}
	var errs []error
	for _, s := range nc.Servers() {
		u, err := url.Parse(s)
		if err != nil {
			continue
		}
		c, err := net.DialTimeout("tcp", u.Host, min(time.Second, timeout))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.Close()
		errs = append(errs, fmt.Errorf("%s accepts connections and did not answer", u.Host))
	}
	if len(errs) == 0 {
		return errors.New("no servers")
	}
	return errors.Join(errs...)
}

// check reports why consumer cc cannot serve a spout in topology top.
func check(name string, cc *natsjs.ConsumerConfig, top *topology.Config) error {
	switch {
	case cc.AckPolicy != natsjs.AckExplicitPolicy:
		return fmt.Errorf("jetstream: consumer %q has AckPolicy %v; the spout needs explicit acks", name, cc.AckPolicy)
	case cc.AckWait < minAckWait:
		return fmt.Errorf("jetstream: consumer %q AckWait %v is below %v", name, cc.AckWait, minAckWait)
	case cc.MaxDeliver > 0 && cc.MaxDeliver <= top.Retry.MaxAttempts:
		return fmt.Errorf("jetstream: consumer %q MaxDeliver %d must exceed Retry.MaxAttempts %d (or be -1): the spout dead-letters a message itself, and must see one delivered past the last attempt",
			name, cc.MaxDeliver, top.Retry.MaxAttempts)
	}
	return nil
}

// Next emits the next message held, dead-lettering on the way those past
// the last attempt or that do not decode.
func (s *Spout) Next(c *topology.SpoutCollector) {
	if !s.started {
		s.started = true
		s.ctx, s.cancel = context.WithCancel(context.Background())
		go s.pump()
	}
	for {
		in := s.take()
		if in == nil {
			return
		}
		switch {
		case in.err != nil:
			s.deadLetter(in, in.err, "no metadata")
			continue
		case in.delivered > s.retry.MaxAttempts:
			s.st.pastLimit.Add(1)
			s.deadLetter(in, fmt.Errorf("jetstream: message %v delivered %d times, Retry.MaxAttempts %d: %w",
				in.pos, in.delivered, s.retry.MaxAttempts, ErrDeliveryLimit), "delivery limit")
			continue
		}
		values, err := s.cfg.Decode(in.msg, in.pos)
		if err != nil {
			s.deadLetter(in, fmt.Errorf("jetstream: decoding message %v: %w", in.pos, err), "undecodable")
			continue
		}
		if err := c.Emit(in, values...); err != nil {
			// A route that fails (a bad direct task, a missing field):
			// the attempt failed.
			s.fail(in, &topology.Failure{Reason: ackcore.ReasonExplicit, Err: err, Attempts: in.delivered})
			continue
		}
		in.emitted.Store(int64(max(time.Since(s.epoch), 1)))
		s.st.emitted.Add(1)
		return
	}
}

// take returns the next message fetched and not yet emitted, or nil.
func (s *Spout) take() *inflight {
	if s.next == len(s.local) {
		clear(s.local)
		s.mu.Lock()
		s.local, s.queue = s.queue, s.local[:0]
		s.mu.Unlock()
		s.next = 0
		if len(s.local) == 0 {
			return nil
		}
	}
	in := s.local[s.next]
	s.local[s.next] = nil
	s.next++
	return in
}

// Attempt is the message's delivery count (topology.Redeliverer).
func (s *Spout) Attempt(msgID any) int { return msgID.(*inflight).delivered }

// Ack acks the message: its tree completed.
func (s *Spout) Ack(msgID any) {
	in := msgID.(*inflight)
	s.release(in)
	s.reply(in.msg.Ack(), &s.st.acked)
}

// Fail hands a failed attempt back with the retry policy's delay, or gives
// the message up at the policy's last attempt; at shutdown (Reason
// Stopped) it hands the message back at once.
func (s *Spout) Fail(msgID any, f *topology.Failure) {
	in := msgID.(*inflight)
	if f.Reason == ackcore.ReasonStopped {
		s.stopping.Store(true) // fetch nothing more only to hand it back
		s.release(in)
		s.reply(in.msg.Nak(), &s.st.nakedStopped)
		return
	}
	s.fail(in, f)
}

func (s *Spout) fail(in *inflight, f *topology.Failure) {
	if in.delivered >= s.retry.MaxAttempts {
		last := *f
		s.deadLetter(in, &last, "retries exhausted")
		return
	}
	d := max(s.retry.Delay(in.delivered, rand.Float64()), minNakDelay)
	s.release(in)
	s.reply(in.msg.NakWithDelay(d), &s.st.naked)
}

// deadLetter calls the hook, then Terms the message.
func (s *Spout) deadLetter(in *inflight, err error, why string) {
	if h := s.cfg.DeadLetter; h != nil {
		h(DeadLetter{Msg: in.msg, Position: in.pos, Delivered: in.delivered, Err: err})
	}
	s.release(in)
	s.reply(in.msg.TermWithReason("xorack: "+why), &s.st.deadLettered)
}

func (s *Spout) reply(err error, ok *atomic.Uint64) {
	if err != nil {
		s.st.replyErrors.Add(1)
		return
	}
	ok.Add(1)
}

// release stops keeping in alive and gives its room back to the pump;
// the executor's reply follows, so no InProgress can follow the reply.
func (s *Spout) release(in *inflight) {
	s.mu.Lock()
	unlink(in)
	s.mu.Unlock()
	s.held.Add(-1)
	select {
	case s.credit <- struct{}{}:
	default:
	}
}

// Close stops fetching, waits for the pull request open, if any, to run
// out (at most FetchWait), and hands back (Nak) every message still held:
// fetched and not emitted. The engine has reported every emitted one by
// now (Reason Stopped, handed back by Fail).
func (s *Spout) Close() error {
	if !s.started {
		return nil
	}
	s.stopping.Store(true)
	s.cancel()
	<-s.done
	s.mu.Lock()
	var held []*inflight
	for in := s.list.next; in != &s.list; in = in.next {
		held = append(held, in)
	}
	s.mu.Unlock()
	for _, in := range held {
		s.release(in)
		s.reply(in.msg.Nak(), &s.st.nakedStopped)
	}
	s.mu.Lock()
	clear(s.queue)
	s.queue = s.queue[:0]
	s.mu.Unlock()
	clear(s.local)
	s.local, s.next = s.local[:0], 0
	return nil
}

// Stats returns the spout's counters; any goroutine.
func (s *Spout) Stats() Stats {
	return Stats{
		Fetched: s.st.fetched.Load(), Emitted: s.st.emitted.Load(), Acked: s.st.acked.Load(),
		Naked: s.st.naked.Load(), NakedStopped: s.st.nakedStopped.Load(),
		DeadLettered: s.st.deadLettered.Load(), PastLimit: s.st.pastLimit.Load(),
		InProgress: s.st.inProgress.Load(), LetGo: s.st.letGo.Load(), ReplyErrors: s.st.replyErrors.Load(),
		FetchErrors: s.st.fetchErrors.Load(), LastFetchError: s.lastFetchError(),
		Held: s.held.Load(), HeldHigh: s.st.heldHigh.Load(), Capacity: int64(s.capacity),
		Connected: s.cfg.JetStream != nil && s.cfg.JetStream.Conn() != nil && s.cfg.JetStream.Conn().IsConnected(),
	}
}

func (s *Spout) lastFetchError() string {
	e, _ := s.st.lastErr.Load().(string)
	return e
}

// fetchLogEvery bounds the log of failed pull requests to one line per
// ten seconds: a lost connection fails one every FetchWait.
const fetchLogEvery = 10 * time.Second

// fetchFailed counts and (rate-limited) logs a failed pull request (the
// pump).
func (s *Spout) fetchFailed(err error) {
	n := s.st.fetchErrors.Add(1)
	s.st.lastErr.Store(err.Error())
	if now := time.Now(); now.Sub(s.lastFetchLog) >= fetchLogEvery {
		s.lastFetchLog = now
		var status any = "none"
		if nc := s.cfg.JetStream.Conn(); nc != nil {
			status = nc.Status()
		}
		s.cfg.Logger.Warn("jetstream: pull request failed; asking again", "stream", s.cfg.Stream, "consumer", s.cfg.Consumer,
			"err", err, "connection", status, "fetch_errors", n)
	}
}

// pump is the spout's own goroutine: it asks the server for as many
// messages as there is room for, hands them to the executor through queue,
// and keeps every held message alive. Once the spout is stopping it asks
// no more; once it is closed it returns as soon as no request is open.
func (s *Spout) pump() {
	defer close(s.done)
	tick := time.NewTicker(s.ackWait / keepAliveTicks)
	defer tick.Stop()
	var (
		batch natsjs.MessageBatch
		msgs  <-chan natsjs.Msg // batch's, nil while no request is open
		retry <-chan time.Time  // after a failed request: when to ask again
	)
	// minAsk keeps requests large while messages are held: a request
	// per freed message would cost a round trip each.
	minAsk := max(1, s.batchMax/4)
	for {
		closed := s.ctx.Err() != nil
		if closed && msgs == nil {
			return
		}
		// Ask only while no request is open: the room, capacity - held,
		// then bounds everything the server may still send.
		if msgs == nil && retry == nil && !s.stopping.Load() {
			held := int(s.held.Load())
			if n := min(s.capacity-held, s.batchMax); n >= minAsk || n > 0 && held == 0 {
				// The server's expiry ends the request, not a deadline of
				// the client's: the server's timeout status comes after
				// every message it sent to the request, so none is lost
				// in transit (the client's own backstop is a second
				// later). A client deadline (FetchContext) ended the
				// request 10% after the server's expiry and dropped what
				// arrived later: on a busy machine, messages delivered,
				// never seen, and pending until their AckWait.
				b, err := s.cons.Fetch(n, natsjs.FetchMaxWait(s.fetchWait))
				if err != nil {
					s.fetchFailed(err)
					retry = time.After(s.fetchWait)
				} else {
					batch, msgs = b, b.Messages()
				}
			}
		}
		var closing <-chan struct{}
		if !closed {
			closing = s.ctx.Done()
		}
		select {
		case m, ok := <-msgs:
			if !ok {
				if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
					s.fetchFailed(err)
				}
				batch, msgs = nil, nil
				continue
			}
			s.arrive(m)
		case <-s.credit:
		case <-retry:
			retry = nil
		case <-tick.C:
			s.keepAlive()
		case <-closing:
		}
	}
}

// arrive takes a message from the server into queue and the keep-alive
// list (the pump).
func (s *Spout) arrive(m natsjs.Msg) {
	in := &inflight{msg: m}
	if md, err := m.Metadata(); err != nil {
		in.err = fmt.Errorf("jetstream: message on %q: %w", m.Subject(), err)
	} else {
		in.pos = Position{Stream: md.Stream, Seq: md.Sequence.Stream}
		in.delivered = int(md.NumDelivered)
	}
	now := time.Since(s.epoch)
	in.arrived = now
	s.mu.Lock()
	in.touched = now
	pushBack(&s.list, in)
	s.queue = append(s.queue, in)
	s.mu.Unlock()
	s.st.fetched.Add(1)
	if h := s.held.Add(1); h > s.st.heldHigh.Load() {
		s.st.heldHigh.Store(h)
	}
}

// keepAlive sends InProgress for every held message untouched for a third
// of AckWait (the pump). It sends under mu, so that a message's final
// reply, sent by the executor after it unlinks the message, always comes
// after its last InProgress on the connection.
//
// A message held for ResetCap + AckWait since it was emitted (or, not
// emitted yet, since it arrived) is older than any tree can be (the
// engine fails a root by its emit time plus ResetCap): its executor
// stopped answering (stuck in Decode or the dead-letter hook, say). The
// keeper lets it go, so that the server redelivers it after AckWait
// rather than never.
func (s *Spout) keepAlive() {
	now := time.Since(s.epoch)
	stale := s.ackWait / 3
	s.mu.Lock()
	defer s.mu.Unlock()
	for in := s.list.next; in != &s.list && now-in.touched >= stale; in = s.list.next {
		unlink(in)
		since := in.arrived
		if e := in.emitted.Load(); e > 0 {
			since = time.Duration(e)
		}
		if now-since > s.maxHold {
			s.st.letGo.Add(1)
			continue
		}
		s.reply(in.msg.InProgress(), &s.st.inProgress)
		in.touched = now
		pushBack(&s.list, in)
	}
}

// pushBack links in at the back of the list whose sentinel is l (under
// mu).
func pushBack(l, in *inflight) {
	in.prev, in.next = l.prev, l
	l.prev.next = in
	l.prev = in
}

// unlink takes in out of its list, if it is in one (under mu).
func unlink(in *inflight) {
	if in.next == nil {
		return
	}
	in.prev.next, in.next.prev = in.next, in.prev
	in.prev, in.next = nil, nil
}
