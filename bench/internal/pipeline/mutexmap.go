package pipeline

import (
	"fmt"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/bench/internal/baseline"
	"github.com/xorack/xorack/internal/outq"
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
	inbox []*outq.Queue[ackcore.Outcome] // the outcome inbox netio's client uses too
	send  []*mutexSender
	quit  chan struct{} // closed by Stop: the expirer exits
}

// NewMutexMap is the "mutex-guarded map shared by producers" design: every
// sender applies its batches to one baseline.MutexMap under its lock.
func NewMutexMap(cfg Config) (Pipe, error) {
	mp := &mutexPipe{quit: make(chan struct{})}
	if err := mp.init("mutexmap", &cfg); err != nil {
		return nil, err
	}
	var err error
	if mp.mm, err = baseline.NewMutexMap(baseline.Config{MaxPending: cfg.MaxPending * cfg.Shards, Timeout: cfg.Timeout, Clock: cfg.Clock}); err != nil {
		return nil, err
	}
	mp.batch, mp.inbox = cfg.Batch, make([]*outq.Queue[ackcore.Outcome], cfg.Receivers)
	for i := range mp.inbox {
		mp.inbox[i] = outq.New[ackcore.Outcome](0)
	}
	for range cfg.Producers {
		mp.send = append(mp.send, &mutexSender{mp: mp, staged: make([]ackcore.Msg, 0, mp.batch), out: make([]ackcore.Outcome, 0, mp.batch)})
	}
	return mp, nil
}

func (mp *mutexPipe) Start() error { return mp.start(mp.expirer) }

func (mp *mutexPipe) expirer(tick <-chan time.Time, out []ackcore.Outcome) {
	for {
		select {
		case <-mp.quit:
			return
		case <-tick:
			out = expireDue(out, mp.mm.Expire, mp.deliver)
		}
	}
}

// deliver hands out to the inboxes, one Put (one lock) per run of
// outcomes for the same inbox.
func (mp *mutexPipe) deliver(out []ackcore.Outcome) {
	start, cur := 0, -1
	for i, o := range out {
		r := -1 // refused, no task: counted, not delivered
		if o.Task < mp.tasks {
			r = int(mp.recvOf[o.Task])
		}
		if r != cur {
			if cur >= 0 {
				mp.inbox[cur].Put(out[start:i], false)
			}
			cur, start = r, i
		}
	}
	if cur >= 0 {
		mp.inbox[cur].Put(out[start:], false)
	}
}

func (mp *mutexPipe) Stats() ackcore.Stats { return mp.mm.Stats() }

func (mp *mutexPipe) Stop() ackcore.Stats {
	mp.stop(func() { close(mp.quit) }, func(bool) {
		for _, q := range mp.inbox {
			q.Close() // Wait says false once its outcomes are taken
		}
	})
	return mp.mm.Stats()
}

func (mp *mutexPipe) Placement() ([]int, string) { return nil, "" }

func (mp *mutexPipe) Sender(i int) acker.Sender { return mp.send[i] }

func (mp *mutexPipe) Inbox(r int) acker.Inbox { return mp.inbox[r] }

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
