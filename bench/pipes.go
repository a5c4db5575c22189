package bench

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/bench/baseline"
)

// pipeConfig configures one pipeline-level acker.
type pipeConfig struct {
	producers  int // producer goroutines; producer p is also spout task p
	shards     int // xorack only
	maxPending int // per shard
	timeout    time.Duration
	clock      ackcore.Clock
	batch      int
	pin        bool
}

// pipe is a concurrent acker as producers and spouts see it. Each producer
// goroutine uses its own sender, and polls its own outcomes through it.
type pipe interface {
	start() error
	sender(p int) sender
	// stats is a snapshot (at most a tick old) while running.
	stats() ackcore.Stats
	// stop ends the acker after every producer is done; the counters it
	// returns are exact.
	stop() ackcore.Stats
}

// sender is one producer's handle. Not safe for concurrent use.
type sender interface {
	send(m ackcore.Msg) error
	// flush hands over everything sent so far.
	flush() error
	// poll appends the outcomes of this producer's roots that have
	// arrived, without waiting.
	poll(dst []ackcore.Outcome) []ackcore.Outcome
}

// xorack: acker.Acker, producers -> SPSC rings -> shard executors ->
// outcome rings -> spouts.

type shardedPipe struct{ a *acker.Acker }

func newShardedPipe(pc pipeConfig) (pipe, error) {
	a, err := acker.New(acker.Config{
		Shards: pc.shards, Producers: pc.producers, Tasks: pc.producers, Batch: pc.batch, Pin: pc.pin,
		Shard: ackcore.Config{MaxPending: pc.maxPending, Timeout: pc.timeout, Clock: pc.clock},
	})
	if err != nil {
		return nil, err
	}
	return &shardedPipe{a: a}, nil
}

func (sp *shardedPipe) start() error         { return sp.a.Start() }
func (sp *shardedPipe) stats() ackcore.Stats { return sp.a.Stats() }
func (sp *shardedPipe) stop() ackcore.Stats  { return sp.a.Stop() }
func (sp *shardedPipe) sender(p int) sender {
	return shardedSender{sp.a.Producer(p), sp.a.TaskReceiver(p)}
}

type shardedSender struct {
	p *acker.Producer
	s *acker.Receiver
}

func (s shardedSender) send(m ackcore.Msg) error                     { return s.p.Send(m) }
func (s shardedSender) flush() error                                 { return s.p.Flush() }
func (s shardedSender) poll(dst []ackcore.Outcome) []ackcore.Outcome { return s.s.Poll(dst) }

// mutexmap: one baseline.MutexMap shared by every producer, each calling
// Apply itself under its lock, and a goroutine expiring roots every tick.

type mutexPipe struct {
	mm     *baseline.MutexMap
	inbox  []inbox // timeouts found by the expirer, per producer
	tick   time.Duration
	quit   chan struct{}
	done   chan struct{}
	batch  int
	closed atomic.Bool
}

// inbox holds one producer's outcomes from the expirer. n is read without
// the lock, on every poll, to skip an empty inbox; the expirer writes it
// only when a root times out, so neighbouring inboxes sharing a line cost
// nothing worth padding for.
type inbox struct {
	mu sync.Mutex
	q  []ackcore.Outcome // guarded by mu
	n  atomic.Int64      // len(q); written by the expirer and the owner under mu
}

func newMutexPipe(pc pipeConfig) (pipe, error) {
	mm, err := baseline.NewMutexMap(baseline.Config{MaxPending: pc.maxPending * pc.shards, Timeout: pc.timeout, Clock: pc.clock})
	if err != nil {
		return nil, err
	}
	return &mutexPipe{mm: mm, inbox: make([]inbox, pc.producers), tick: ackcore.DefaultTick,
		quit: make(chan struct{}), done: make(chan struct{}), batch: pc.batch}, nil
}

func (mp *mutexPipe) start() error {
	go mp.expirer()
	return nil
}

func (mp *mutexPipe) expirer() {
	defer close(mp.done)
	t := time.NewTicker(mp.tick)
	defer t.Stop()
	out := make([]ackcore.Outcome, 0, 1024)
	for {
		select {
		case <-mp.quit:
			return
		case <-t.C:
		}
		for more := true; more; {
			out, more = mp.mm.Expire(out[:0])
			for _, o := range out {
				if int(o.Task) < len(mp.inbox) {
					in := &mp.inbox[o.Task]
					in.mu.Lock()
					in.q = append(in.q, o)
					in.n.Store(int64(len(in.q)))
					in.mu.Unlock()
				}
			}
		}
	}
}

func (mp *mutexPipe) stats() ackcore.Stats { return mp.mm.Stats() }

func (mp *mutexPipe) stop() ackcore.Stats {
	if !mp.closed.Swap(true) {
		close(mp.quit)
		<-mp.done
	}
	return mp.mm.Stats()
}

func (mp *mutexPipe) sender(p int) sender {
	return &mutexSender{mp: mp, in: &mp.inbox[p], staged: make([]ackcore.Msg, 0, mp.batch)}
}

type mutexSender struct {
	mp     *mutexPipe
	in     *inbox
	staged []ackcore.Msg
	out    []ackcore.Outcome
}

func (s *mutexSender) send(m ackcore.Msg) error {
	s.staged = append(s.staged, m)
	if len(s.staged) == cap(s.staged) {
		return s.flush()
	}
	return nil
}

func (s *mutexSender) flush() error {
	if len(s.staged) > 0 {
		s.out = s.mp.mm.Apply(s.staged, s.out)
		s.staged = s.staged[:0]
	}
	return nil
}

func (s *mutexSender) poll(dst []ackcore.Outcome) []ackcore.Outcome {
	dst = append(dst, s.out...)
	s.out = s.out[:0]
	if s.in.n.Load() > 0 {
		s.in.mu.Lock()
		dst = append(dst, s.in.q...)
		s.in.q = s.in.q[:0]
		s.in.n.Store(0)
		s.in.mu.Unlock()
	}
	return dst
}

// chanshard: one xorack Shard on its own goroutine, fed by a Go channel of
// message blocks and answering through one channel of outcome blocks per
// producer: what a Go programmer builds before reaching for rings.

// chanBlock is the messages or outcomes per channel element: 64 x 32 B =
// 2 KiB, which MEASURING.md found moves 20x faster than one per element.
const chanBlock = 64

// chanDepth is the blocks a channel holds: 64 x 64 = 4096 messages, the
// capacity of the xorack pipeline's rings.
const chanDepth = 64

type msgBlock struct {
	n int
	m [chanBlock]ackcore.Msg
}

type outBlock struct {
	n int
	o [chanBlock]ackcore.Outcome
}

type chanPipe struct {
	sh   *ackcore.Shard
	in   chan msgBlock
	outs []chan outBlock
	over [][]ackcore.Outcome // outcomes a full channel could not take yet; shard goroutine only
	tick time.Duration
	done chan struct{}

	mu   sync.Mutex // guards snap
	snap ackcore.Stats

	closed atomic.Bool
}

func newChanPipe(pc pipeConfig) (pipe, error) {
	sh, err := ackcore.NewShard(ackcore.Config{MaxPending: pc.maxPending * pc.shards, Timeout: pc.timeout, Clock: pc.clock})
	if err != nil {
		return nil, err
	}
	cp := &chanPipe{sh: sh, in: make(chan msgBlock, chanDepth), outs: make([]chan outBlock, pc.producers),
		over: make([][]ackcore.Outcome, pc.producers), tick: ackcore.DefaultTick, done: make(chan struct{})}
	for i := range cp.outs {
		cp.outs[i] = make(chan outBlock, chanDepth)
	}
	return cp, nil
}

func (cp *chanPipe) start() error {
	go cp.loop()
	return nil
}

// loop is the shard goroutine. It never blocks on a producer: an outcome
// whose channel is full waits in over (a producer blocked sending to a
// shard blocked sending to it would deadlock), and goes first next pass.
func (cp *chanPipe) loop() {
	defer close(cp.done)
	t := time.NewTicker(cp.tick)
	defer t.Stop()
	out := make([]ackcore.Outcome, 0, 1024)
	for {
		select {
		case b, ok := <-cp.in:
			if !ok {
				out = cp.sh.StopAll(out[:0])
				cp.route(out)
				cp.publish()
				return
			}
			out = cp.sh.Apply(b.m[:b.n], out[:0])
			cp.route(out)
		case <-t.C:
			for more := true; more; {
				out, more = cp.sh.Expire(out[:0])
				cp.route(out)
			}
			cp.publish()
		}
		cp.flushOver()
	}
}

func (cp *chanPipe) route(out []ackcore.Outcome) {
	for _, o := range out {
		if int(o.Task) < len(cp.over) {
			cp.over[o.Task] = append(cp.over[o.Task], o)
		}
	}
}

func (cp *chanPipe) flushOver() {
	for t, q := range cp.over {
		sent := 0
		for sent < len(q) {
			var b outBlock
			b.n = copy(b.o[:], q[sent:])
			select {
			case cp.outs[t] <- b:
				sent += b.n
				continue
			default:
			}
			break
		}
		if sent > 0 {
			cp.over[t] = append(q[:0], q[sent:]...)
		}
	}
}

func (cp *chanPipe) publish() {
	st := cp.sh.Stats()
	cp.mu.Lock()
	cp.snap = st
	cp.mu.Unlock()
}

func (cp *chanPipe) stats() ackcore.Stats {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.snap
}

func (cp *chanPipe) stop() ackcore.Stats {
	if !cp.closed.Swap(true) {
		close(cp.in)
		<-cp.done
	}
	return cp.stats()
}

func (cp *chanPipe) sender(p int) sender { return &chanSender{cp: cp, out: cp.outs[p]} }

type chanSender struct {
	cp  *chanPipe
	out chan outBlock
	b   msgBlock
}

func (s *chanSender) send(m ackcore.Msg) error {
	s.b.m[s.b.n] = m
	if s.b.n++; s.b.n == chanBlock {
		return s.flush()
	}
	return nil
}

func (s *chanSender) flush() error {
	if s.b.n > 0 {
		s.cp.in <- s.b
		s.b.n = 0
	}
	return nil
}

func (s *chanSender) poll(dst []ackcore.Outcome) []ackcore.Outcome {
	for {
		select {
		case b := <-s.out:
			dst = append(dst, b.o[:b.n]...)
		default:
			return dst
		}
	}
}
