package pipeline

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/bench/baseline"
)

// padBytes separates state written by different goroutines: two 64-byte
// lines, since the adjacent-line prefetcher moves lines in pairs.
const padBytes = 128

// mutexmap: one baseline.MutexMap shared by every sender, each calling
// Apply itself under its lock, a goroutine expiring roots every tick, and
// the outcomes handed to mutex-guarded inboxes.

type mutexPipe struct {
	base
	mm    *baseline.MutexMap
	batch int
	inbox []mutexInbox
	send  []*mutexSender
	tick  time.Duration

	quit    chan struct{} // closed by Stop: the expirer exits
	done    chan struct{} // closed by the expirer
	stopped chan struct{} // closed once Stop is done: inboxes drain and end
}

// mutexInbox holds one receiver's outcomes. n is read without the lock on
// every poll, to skip an empty inbox.
type mutexInbox struct {
	mu      sync.Mutex
	q       []ackcore.Outcome // guarded by mu
	n       atomic.Int64      // len(q); written under mu
	waiting atomic.Bool       // its reader is about to wait on sig
	sig     chan struct{}     // capacity 1: outcomes arrived
	p       *mutexPipe
	_       [padBytes]byte
}

// NewMutexMap is the "mutex-guarded map shared by producers" design: every
// sender applies its batches to one baseline.MutexMap under its lock.
func NewMutexMap(cfg Config) (Pipe, error) {
	mp := &mutexPipe{tick: ackcore.DefaultTick, quit: make(chan struct{}), done: make(chan struct{}), stopped: make(chan struct{})}
	if err := mp.init("mutexmap", &cfg); err != nil {
		return nil, err
	}
	var err error
	if mp.mm, err = baseline.NewMutexMap(baseline.Config{MaxPending: cfg.MaxPending * cfg.Shards, Timeout: cfg.Timeout, Clock: cfg.Clock}); err != nil {
		return nil, err
	}
	mp.batch, mp.inbox = cfg.Batch, make([]mutexInbox, cfg.Receivers)
	for i := range mp.inbox {
		mp.inbox[i].sig = make(chan struct{}, 1)
		mp.inbox[i].p = mp
	}
	for range cfg.Producers {
		mp.send = append(mp.send, &mutexSender{mp: mp, staged: make([]ackcore.Msg, 0, mp.batch), out: make([]ackcore.Outcome, 0, mp.batch)})
	}
	return mp, nil
}

func (mp *mutexPipe) Start() error { return mp.start(mp.expirer) }

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
			mp.deliver(out)
		}
	}
}

// deliver hands out to the inboxes, taking each inbox's lock once per run
// of outcomes for it.
func (mp *mutexPipe) deliver(out []ackcore.Outcome) {
	var in *mutexInbox
	for _, o := range out {
		if o.Task >= mp.tasks {
			continue // refused, no task: counted, not delivered
		}
		if next := &mp.inbox[mp.recvOf[o.Task]]; next != in {
			if in != nil {
				in.publish()
			}
			in = next
			in.mu.Lock()
		}
		in.q = append(in.q, o)
	}
	if in != nil {
		in.publish()
	}
}

// publish ends a run of appends: it updates n, unlocks, and wakes a
// waiting reader.
func (in *mutexInbox) publish() {
	in.n.Store(int64(len(in.q)))
	in.mu.Unlock()
	if in.waiting.Load() {
		select {
		case in.sig <- struct{}{}:
		default:
		}
	}
}

func (mp *mutexPipe) Stats() ackcore.Stats { return mp.mm.Stats() }

func (mp *mutexPipe) Stop() ackcore.Stats {
	mp.once.Do(func() {
		mp.closed.Store(true)
		close(mp.quit)
		if mp.started.Load() {
			<-mp.done
		}
		close(mp.stopped)
	})
	return mp.mm.Stats()
}

func (mp *mutexPipe) Placement() ([]int, string) { return nil, "" }

func (mp *mutexPipe) Sender(i int) acker.Sender { return mp.send[i] }

func (mp *mutexPipe) Inbox(r int) acker.Inbox { return &mp.inbox[r] }

type mutexSender struct {
	mp     *mutexPipe
	staged []ackcore.Msg
	out    []ackcore.Outcome
	_      [padBytes]byte
}

func (s *mutexSender) Send(m ackcore.Msg) error {
	if err := s.mp.check(&m); err != nil {
		return err
	}
	if len(s.staged) == cap(s.staged) {
		s.apply() // hand over a full batch when the next message comes, as xorack's spans are
	}
	s.staged = append(s.staged, m)
	return nil
}

func (s *mutexSender) SendBatch(msgs []ackcore.Msg) error { return sendEach(s.Send, msgs) }

// TrySend never finds the map full: it is Send.
func (s *mutexSender) TrySend(m ackcore.Msg) (bool, error) {
	err := s.Send(m)
	return err == nil, err
}

func (s *mutexSender) Flush() error {
	if s.mp.closed.Load() && len(s.staged) > 0 {
		return fmt.Errorf("%w: %d staged messages not applied", acker.ErrClosed, len(s.staged))
	}
	s.apply()
	return nil
}

func (s *mutexSender) apply() {
	if len(s.staged) > 0 {
		s.out = s.mp.mm.Apply(s.staged, s.out[:0])
		s.staged = s.staged[:0]
		s.mp.deliver(s.out)
	}
}

func (in *mutexInbox) Poll(dst []ackcore.Outcome) []ackcore.Outcome {
	if in.n.Load() > 0 {
		in.mu.Lock()
		dst = append(dst, in.q...)
		in.q = in.q[:0]
		in.n.Store(0)
		in.mu.Unlock()
	}
	return dst
}

func (in *mutexInbox) Wait(dst []ackcore.Outcome) ([]ackcore.Outcome, bool) {
	return in.WaitUntil(dst, nil)
}

func (in *mutexInbox) WaitUntil(dst []ackcore.Outcome, wake <-chan time.Time) ([]ackcore.Outcome, bool) {
	for {
		n := len(dst)
		if dst = in.Poll(dst); len(dst) > n {
			return dst, true
		}
		select {
		case <-in.p.stopped:
			dst = in.Poll(dst)
			return dst, len(dst) > n
		default:
		}
		in.waiting.Store(true)
		if in.n.Load() == 0 {
			select {
			case <-in.sig:
			case <-in.p.stopped:
			case <-wake:
				in.waiting.Store(false)
				return in.Poll(dst), true
			}
		}
		in.waiting.Store(false)
	}
}
