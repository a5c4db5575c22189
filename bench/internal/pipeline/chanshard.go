package pipeline

import (
	"fmt"
	"sync"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// chanshard: one xorack Shard on its own goroutine, fed by a Go channel of
// message blocks and answering through one channel of outcome blocks per
// receiver: what a Go programmer builds before reaching for rings.

// chanBlock is the messages or outcomes per channel element: 64 × 32 B =
// 2 KiB. A channel of 64-item arrays moves items about ten times as fast
// as a channel of single items (ring's BenchmarkRing, impl=chanarr against
// impl=chan/batch=1: 104-133M items/s against 10.8-15.8M on 41fd2ed, the
// rings section of BENCHMARKS.md).
const chanBlock = 64

// chanDepth is the blocks a channel holds: 64 × 64 = 4096 messages, the
// capacity of xorack's rings.
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
	base
	sh    *ackcore.Shard
	in    chan msgBlock
	outs  []chan outBlock     // by receiver; closed by the shard goroutine when it exits
	over  [][]ackcore.Outcome // outcomes a full channel could not take yet; shard goroutine only
	send  []*chanSender
	inbox []*chanInbox

	mu   sync.Mutex // guards snap
	snap ackcore.Stats
}

// NewChanShard is one xorack shard on a goroutine fed by a channel of
// message blocks, answering through a channel of outcome blocks per
// receiver.
func NewChanShard(cfg Config) (Pipe, error) {
	cp := &chanPipe{in: make(chan msgBlock, chanDepth)}
	if err := cp.init("chanshard", &cfg); err != nil {
		return nil, err
	}
	var err error
	if cp.sh, err = ackcore.NewShard(ackcore.Config{MaxPending: cfg.MaxPending * cfg.Shards, Timeout: cfg.Timeout, Clock: cfg.Clock}); err != nil {
		return nil, err
	}
	cp.outs, cp.over = make([]chan outBlock, cfg.Receivers), make([][]ackcore.Outcome, cfg.Receivers)
	for i := range cp.outs {
		cp.outs[i] = make(chan outBlock, chanDepth)
		cp.inbox = append(cp.inbox, &chanInbox{out: cp.outs[i]})
	}
	for range cfg.Producers {
		cp.send = append(cp.send, &chanSender{cp: cp, blocks: make([]msgBlock, (cfg.Batch+chanBlock-1)/chanBlock)})
	}
	return cp, nil
}

func (cp *chanPipe) Start() error { return cp.start(cp.loop) }

// loop is the shard goroutine. It never blocks on a receiver while
// running: an outcome whose channel is full waits in over (a producer
// blocked sending to a shard blocked sending to it would deadlock), and
// goes first next pass. Stopping, it reports what is pending and waits
// for the receivers to take everything.
func (cp *chanPipe) loop(tick <-chan time.Time, out []ackcore.Outcome) {
	for {
		select {
		case b, ok := <-cp.in:
			if !ok {
				cp.route(cp.sh.StopAll(out[:0]))
				cp.publish()
				cp.flushOver(true)
				for _, ch := range cp.outs {
					close(ch)
				}
				return
			}
			out = cp.sh.Apply(b.m[:b.n], out[:0])
			cp.route(out)
		case <-tick:
			out = expireDue(out, cp.sh.Expire, cp.route)
			cp.publish()
		}
		cp.flushOver(false)
	}
}

func (cp *chanPipe) route(out []ackcore.Outcome) {
	for _, o := range out {
		if o.Task < cp.tasks {
			r := cp.recvOf[o.Task]
			cp.over[r] = append(cp.over[r], o)
		}
	}
}

// flushOver sends each receiver what its channel takes now (wait: all of
// it, waiting).
func (cp *chanPipe) flushOver(wait bool) {
	for r, q := range cp.over {
		sent := 0
		for sent < len(q) {
			var b outBlock
			b.n = copy(b.o[:], q[sent:])
			if wait {
				cp.outs[r] <- b
				sent += b.n
				continue
			}
			select {
			case cp.outs[r] <- b:
				sent += b.n
				continue
			default:
			}
			break
		}
		if sent > 0 {
			cp.over[r] = append(q[:0], q[sent:]...)
		}
	}
}

func (cp *chanPipe) publish() {
	st := cp.sh.Stats()
	cp.mu.Lock()
	cp.snap = st
	cp.mu.Unlock()
}

func (cp *chanPipe) Stats() ackcore.Stats {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.snap
}

func (cp *chanPipe) Stop() ackcore.Stats {
	cp.stop(func() { close(cp.in) }, func(started bool) {
		if !started { // else the loop closed them
			for _, ch := range cp.outs {
				close(ch)
			}
		}
	})
	return cp.Stats()
}

func (cp *chanPipe) Placement() ([]int, string) { return nil, "" }

func (cp *chanPipe) Sender(i int) acker.Sender { return cp.send[i] }

func (cp *chanPipe) Inbox(r int) acker.Inbox { return cp.inbox[r] }

// chanSender stages up to Batch messages in blocks and hands them over,
// one channel send per block, when the next message finds them full or on
// Flush (as xorack's spans are).
type chanSender struct {
	cp     *chanPipe
	blocks []msgBlock
	n      int // messages staged
	sent   int // blocks of the stage already sent (a TrySend got part of it through)
	_      [padBytes]byte
}

func (s *chanSender) Send(m ackcore.Msg) error {
	if err := s.cp.check(&m); err != nil {
		return err
	}
	if s.n == len(s.blocks)*chanBlock {
		s.handOver(true)
	}
	s.stage(m)
	return nil
}

func (s *chanSender) stage(m ackcore.Msg) {
	b := &s.blocks[s.n/chanBlock]
	i := s.n % chanBlock
	b.m[i], b.n = m, i+1
	s.n++
}

// handOver sends the staged blocks (wait false: those the channel takes
// now) and reports whether it sent them all.
func (s *chanSender) handOver(wait bool) bool {
	for ; s.sent*chanBlock < s.n; s.sent++ {
		if wait {
			s.cp.in <- s.blocks[s.sent]
			continue
		}
		select {
		case s.cp.in <- s.blocks[s.sent]:
		default:
			return false
		}
	}
	s.n, s.sent = 0, 0
	return true
}

func (s *chanSender) SendBatch(msgs []ackcore.Msg) error { return sendEach(s.Send, msgs) }

// TrySend is Send that says no when its stage is full and the channel
// cannot take all of it now.
func (s *chanSender) TrySend(m ackcore.Msg) (bool, error) {
	if err := s.cp.check(&m); err != nil {
		return false, err
	}
	if s.n == len(s.blocks)*chanBlock && !s.handOver(false) {
		return false, nil
	}
	s.stage(m)
	return true, nil
}

func (s *chanSender) Flush() error {
	if s.n > 0 && s.cp.closed.Load() {
		return fmt.Errorf("%w: %d staged messages not applied", acker.ErrClosed, s.n-s.sent*chanBlock)
	}
	s.handOver(true)
	return nil
}

type chanInbox struct {
	out chan outBlock
	_   [padBytes]byte
}

func (in *chanInbox) Poll(dst []ackcore.Outcome) []ackcore.Outcome {
	for {
		select {
		case b, ok := <-in.out:
			if !ok {
				return dst
			}
			dst = append(dst, b.o[:b.n]...)
		default:
			return dst
		}
	}
}

func (in *chanInbox) Wait(dst []ackcore.Outcome) ([]ackcore.Outcome, bool) {
	b, ok := <-in.out
	if !ok {
		return dst, false
	}
	return in.Poll(append(dst, b.o[:b.n]...)), true
}

func (in *chanInbox) WaitUntil(dst []ackcore.Outcome, wake <-chan time.Time) ([]ackcore.Outcome, bool) {
	select {
	case b, ok := <-in.out:
		if !ok {
			return dst, false
		}
		return in.Poll(append(dst, b.o[:b.n]...)), true
	case <-wake:
		return in.Poll(dst), true
	}
}
