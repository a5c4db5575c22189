package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/xorack/xorack/source/jetstream/jstest"
	"github.com/xorack/xorack/topology"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds every wait of a test: generous, for a machine busy
// with other work; the tests take seconds.
const testTimeout = 30 * time.Second

// size is n, or short under -short.
func size(n, short int) int {
	if testing.Short() {
		return short
	}
	return n
}

// env is an embedded nats-server with JetStream, a client connection and a
// monitor of every ack reply sent to the server.
type env struct {
	t   *testing.T
	srv *jstest.Server
	nc  *nats.Conn
	js  natsjs.JetStream
	mon *monitor
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv, err := jstest.Start(jstest.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if u, err := url.Parse(srv.URL()); err != nil || u.Hostname() != "127.0.0.1" {
		t.Fatalf("nats-server at %q, want loopback", srv.URL())
	}
	e := &env{t: t, srv: srv}
	e.nc, e.js = e.connect()
	e.mon = newMonitor(t, srv.URL())
	return e
}

// newStream is an env with stream S of n messages and durable consumer
// c on it (ConsumerConfig with ackWait and maxAckPending).
func newStream(t *testing.T, n int, ackWait time.Duration, maxAckPending int) (*env, natsjs.Consumer) {
	t.Helper()
	e := newEnv(t)
	e.stream("S", n, nil)
	return e, e.consumer("S", ConsumerConfig("c", ackWait, maxAckPending))
}

// consecutive reports whether attempts are 1, 2, ..., len(attempts).
func consecutive(attempts []int) bool {
	for k, a := range attempts {
		if a != k+1 {
			return false
		}
	}
	return true
}

// connect opens a client connection of its own (closed at cleanup).
func (e *env) connect() (*nats.Conn, natsjs.JetStream) {
	e.t.Helper()
	return dial(e.t, e.srv.URL(), nats.Name("jetstream-spout-test"), nats.MaxReconnects(0))
}

// dial connects to url with opts (closed at cleanup).
func dial(t *testing.T, url string, opts ...nats.Option) (*nats.Conn, natsjs.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return c
}

// stream creates a stream of subjects name.> and publishes n messages,
// "message 1" ... "message n" (stream sequences 1 ... n), with text(i)
// when it is set.
func (e *env) stream(name string, n int, text func(i int) string) {
	e.t.Helper()
	if _, err := e.js.CreateStream(ctx(e.t), natsjs.StreamConfig{
		Name: name, Subjects: []string{name + ".>"}, Storage: natsjs.FileStorage,
	}); err != nil {
		e.t.Fatal(err)
	}
	e.publish(name, 1, n, text)
}

// publish publishes messages from..to (their stream sequences when the
// stream held from-1 before).
func (e *env) publish(stream string, from, to int, text func(i int) string) {
	e.t.Helper()
	if text == nil {
		text = func(i int) string { return fmt.Sprintf("message %d", i) }
	}
	futures := make([]natsjs.PubAckFuture, 0, to-from+1)
	for i := from; i <= to; i++ {
		f, err := e.js.PublishAsync(stream+".in", []byte(text(i)))
		if err != nil {
			e.t.Fatal(err)
		}
		futures = append(futures, f)
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-time.After(testTimeout):
		e.t.Fatal("publishes not acknowledged")
	}
	for k, f := range futures {
		select {
		case ack := <-f.Ok():
			if ack.Sequence != uint64(from+k) {
				e.t.Fatalf("message %d stored at sequence %d", from+k, ack.Sequence)
			}
		case err := <-f.Err():
			e.t.Fatal(err)
		}
	}
}

func (e *env) consumer(stream string, cc natsjs.ConsumerConfig) natsjs.Consumer {
	e.t.Helper()
	c, err := e.js.CreateOrUpdateConsumer(ctx(e.t), stream, cc)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *env) info(stream, consumer string) *natsjs.ConsumerInfo {
	e.t.Helper()
	c, err := e.js.Consumer(ctx(e.t), stream, consumer)
	if err != nil {
		e.t.Fatal(err)
	}
	return c.CachedInfo()
}

// waitSettled waits until the consumer has nothing left: its ack floor at
// the stream's last sequence, nothing pending delivery or acknowledgement.
func (e *env) waitSettled(stream, consumer string, last uint64) *natsjs.ConsumerInfo {
	e.t.Helper()
	var info *natsjs.ConsumerInfo
	waitFor(e.t, "the consumer to settle", func() bool {
		info = e.info(stream, consumer)
		return settled(info, last)
	}, func() string { return describe(info) })
	return info
}

func settled(info *natsjs.ConsumerInfo, last uint64) bool {
	return info.AckFloor.Stream == last && info.NumAckPending == 0 && info.NumPending == 0
}

func describe(info *natsjs.ConsumerInfo) string {
	if info == nil {
		return "no info"
	}
	return fmt.Sprintf("ack floor %d, delivered %d, %d ack pending, %d pending, %d redelivered, %d waiting",
		info.AckFloor.Stream, info.Delivered.Stream, info.NumAckPending, info.NumPending, info.NumRedelivered, info.NumWaiting)
}

// waitFor polls cond until it holds or testTimeout passes; state, if set,
// says what was seen last.
func waitFor(t *testing.T, what string, cond func() bool, state func() string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			s := ""
			if state != nil {
				s = ": " + state()
			}
			t.Fatalf("timed out after %v waiting for %s%s", testTimeout, what, s)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// reply is one ack reply a client sent, as the monitor saw it.
type reply struct {
	kind      string        // +ACK, -NAK, +WPI, +TERM, ...
	delay     time.Duration // a -NAK's delay (0: a bare Nak)
	seq       uint64        // the stream sequence it answers
	delivered int           // the delivery it answers
	at        time.Time
}

// monitor subscribes, on a connection of its own, to every ack reply of
// the server's JetStream consumers ($JS.ACK.>): the replies the spout
// sends, seen as the server sees them.
type monitor struct {
	mu      sync.Mutex
	replies []reply
	bad     []string
}

func newMonitor(t *testing.T, url string) *monitor {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name("ack-monitor"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	m := &monitor{}
	if _, err := nc.Subscribe("$JS.ACK.>", m.record); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, b := range m.bad {
			t.Error(b)
		}
	})
	return m
}

func (m *monitor) record(msg *nats.Msg) {
	r := reply{at: time.Now()}
	tok := strings.Split(msg.Subject, ".")
	// $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>,
	// or with a domain and an account hash after ACK (and a token at the end).
	var d, sq string
	switch {
	case len(tok) == 9:
		d, sq = tok[4], tok[5]
	case len(tok) >= 11:
		d, sq = tok[6], tok[7]
	}
	n, err1 := strconv.Atoi(d)
	seq, err2 := strconv.ParseUint(sq, 10, 64)
	body := string(msg.Data)
	r.kind, r.delivered, r.seq = body, n, seq
	if i := strings.IndexByte(body, ' '); i >= 0 {
		r.kind = body[:i]
		if r.kind == "-NAK" {
			var p struct {
				Delay int64 `json:"delay"`
			}
			if err := json.Unmarshal([]byte(body[i+1:]), &p); err != nil {
				m.mu.Lock()
				m.bad = append(m.bad, fmt.Sprintf("monitor: -NAK body %q: %v", body, err))
				m.mu.Unlock()
			}
			r.delay = time.Duration(p.Delay)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err1 != nil || err2 != nil {
		m.bad = append(m.bad, fmt.Sprintf("monitor: ack subject %q", msg.Subject))
		return
	}
	m.replies = append(m.replies, r)
}

// all returns the replies seen so far, kinds filtered when given.
func (m *monitor) all(kinds ...string) []reply {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []reply
	for _, r := range m.replies {
		if len(kinds) == 0 || contains(kinds, r.kind) {
			out = append(out, r)
		}
	}
	return out
}

func (m *monitor) count(kind string, seq uint64) int {
	n := 0
	for _, r := range m.all(kind) {
		if r.seq == seq {
			n++
		}
	}
	return n
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// testTopology is the topology config of the tests: at least once, a
// short message timeout, a retry policy without jitter.
func testTopology() topology.Config {
	return topology.Config{MessageTimeout: 5 * time.Second, MaxSpoutPending: 64, Seed: 11,
		Retry: topology.RetryPolicy{MaxAttempts: 5, Backoff: 20 * time.Millisecond, MaxBackoff: time.Second, Jitter: -1}}
}

// pipeline is a running topology with JetStream spouts.
type pipeline struct {
	top     *topology.Topology
	stopped bool
	spouts  []*Spout
	mu      sync.Mutex
}

// build wires spouts (tasks of them) reading scfg into the bolts add
// declares, and starts the topology.
func build(t *testing.T, cfg topology.Config, scfg Config, tasks int, add func(b *topology.Builder)) (*pipeline, error) {
	t.Helper()
	p := &pipeline{}
	b := topology.NewBuilder()
	b.Spout("js", func() topology.Spout {
		s := New(scfg)
		p.mu.Lock()
		p.spouts = append(p.spouts, s)
		p.mu.Unlock()
		return s
	}).Tasks(tasks).Output("pos", "data")
	add(b)
	top, err := b.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := top.Start(); err != nil {
		return nil, err
	}
	p.top = top
	t.Cleanup(func() { p.stop(t) })
	return p, nil
}

func start(t *testing.T, cfg topology.Config, scfg Config, tasks int, add func(b *topology.Builder)) *pipeline {
	t.Helper()
	p, err := build(t, cfg, scfg, tasks, add)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *pipeline) stop(t *testing.T) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p.stopWith(t, c)
}

// stopNow stops the pipeline without the drain (an ended context): what
// is in flight is failed as stopped.
func (p *pipeline) stopNow(t *testing.T) {
	t.Helper()
	c, cancel := context.WithCancel(context.Background())
	cancel()
	p.stopWith(t, c)
}

func (p *pipeline) stopWith(t *testing.T, c context.Context) {
	t.Helper()
	if p.stopped {
		return
	}
	p.stopped = true
	if err := p.top.Stop(c); err != nil {
		t.Fatal(err)
	}
}

// stats sums the spouts' counters: every number field of Stats (the
// error text and the connection state stay empty).
func (p *pipeline) stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	var s Stats
	sum := reflect.ValueOf(&s).Elem()
	for _, sp := range p.spouts {
		one := reflect.ValueOf(sp.Stats())
		for i := range sum.NumField() {
			switch f := sum.Field(i); {
			case f.CanUint():
				f.SetUint(f.Uint() + one.Field(i).Uint())
			case f.CanInt():
				f.SetInt(f.Int() + one.Field(i).Int())
			}
		}
	}
	return s
}

// ledger records what bolts saw: per stream sequence, the attempts in
// order and when each was executed.
type ledger struct {
	mu       sync.Mutex
	attempts map[uint64][]int
	at       map[uint64][]time.Time
	failedAt map[uint64][]time.Time
}

func newLedger() *ledger {
	return &ledger{attempts: map[uint64][]int{}, at: map[uint64][]time.Time{}, failedAt: map[uint64][]time.Time{}}
}

func (l *ledger) saw(seq uint64, attempt int) {
	l.mu.Lock()
	l.attempts[seq] = append(l.attempts[seq], attempt)
	l.at[seq] = append(l.at[seq], time.Now())
	l.mu.Unlock()
}

func (l *ledger) failed(seq uint64) {
	l.mu.Lock()
	l.failedAt[seq] = append(l.failedAt[seq], time.Now())
	l.mu.Unlock()
}

func (l *ledger) get(seq uint64) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.attempts[seq]...)
}

// recorder is a basic bolt that records each input in l and fails it when
// fail says so.
func recorder(l *ledger, fail func(seq uint64, attempt int) bool) func() topology.Bolt {
	return func() topology.Bolt {
		return topology.Basic(topology.BasicFunc(func(t *topology.Tuple, c *topology.BasicCollector) error {
			pos := t.Value(0).(Position)
			l.saw(pos.Seq, t.Attempt())
			if fail != nil && fail(pos.Seq, t.Attempt()) {
				l.failed(pos.Seq)
				return errInjected
			}
			return nil
		}))
	}
}

var errInjected = fmt.Errorf("injected failure")

// ctlSpout emits an untracked command for each value sent on cmds.
type ctlSpout struct{ cmds chan string }

func (s *ctlSpout) Next(c *topology.SpoutCollector) {
	select {
	case cmd := <-s.cmds:
		if err := c.Emit(nil, cmd); err != nil {
			panic(err)
		}
	default:
	}
}
func (s *ctlSpout) Ack(any)                     {}
func (s *ctlSpout) Fail(any, *topology.Failure) {}

// holder holds every message tuple until a command: "reset" RESETs them,
// "ack" acks them. It counts the most held at once.
type holder struct {
	mu     sync.Mutex
	held   []*topology.Tuple
	seen   []uint64
	most   int
	resets int
}

func (h *holder) Execute(t *topology.Tuple, c *topology.BoltCollector) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.Source() == "js" {
		h.held = append(h.held, t)
		h.seen = append(h.seen, t.Value(0).(Position).Seq)
		h.most = max(h.most, len(h.held))
		return
	}
	switch t.String(0) {
	case "reset":
		for _, x := range h.held {
			c.Reset(x)
		}
		h.resets++
	case "ack":
		for _, x := range h.held {
			c.Ack(x)
		}
		h.held = h.held[:0]
	}
	c.Ack(t)
}

func (h *holder) state() (held, seen, most int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held), len(h.seen), h.most
}

// withHolder adds the control spout and a holder bolt on one task.
func withHolder(h *holder, cmds chan string) func(b *topology.Builder) {
	return func(b *topology.Builder) {
		b.Spout("ctl", func() topology.Spout { return &ctlSpout{cmds: cmds} }).Output("cmd")
		b.Bolt("hold", func() topology.Bolt { return h }).Input("js", topology.Global()).Input("ctl", topology.Global())
	}
}

// beginDrain makes top stop asking its spouts for tuples now (Drain with
// an ended context sets the drain and returns at once), so that a test
// that then stops top and releases its held bolts has the stop begin
// mid-run: a Stop started on a goroutine might otherwise begin its drain
// only after the released trees and the rest of the input are done.
func beginDrain(top *topology.Topology) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = top.Drain(ctx)
}
