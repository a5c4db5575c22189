package bench

// The pipeline level's producers: what each producer goroutine does in
// each phase of a run (warm-up, peak, throttled latency, drain), driven by
// the runner in pipeline.go.

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// sender is one producer's handle on a pipeline: its Sender, and the Inbox
// of its spout task (producer p is task p and polls its own outcomes, as a
// Storm spout executor does). Not safe for concurrent use.
type sender struct {
	acker.Sender
	in acker.Inbox
}

// poll appends the outcomes of this producer's roots that have arrived,
// without waiting.
func (s sender) poll(dst []ackcore.Outcome) []ackcore.Outcome { return s.in.Poll(dst) }

// drainWait bounds how long producers wait for outcomes at the end of a
// pipeline run; an acker that loses outcomes fails verification after it.
// A variable so that tests can shorten it.
var drainWait = 10 * time.Second

// latencyQuantum is the messages a throttled producer sends between clock
// checks, flushing after each so that nothing waits in a half-filled span:
// at half of a 20 M msgs/s peak, 64 messages take 6 µs, fine pacing for
// one clock read and one publish per quantum.
const latencyQuantum = 64

// latencySettle bounds the wait after a latency run for its last roots,
// once the run has timed at least one; latencySettleEmpty bounds it while
// none is timed yet (a short run on a busy machine may end with every
// root it sent still in flight, and a row without samples).
const (
	latencySettle      = 50 * time.Millisecond
	latencySettleEmpty = 5 * time.Second
)

// phase is what the runner asks producers to do next.
type phase int

const (
	phWarm     phase = iota // prefix, then warm-up
	phPeak                  // send as fast as the pipe takes
	phLatency               // send at a set rate, timing completions
	phDrain                 // to a round boundary, finish every tree, wait for its outcome
	phTimeouts              // after the clock skipped: wait for the timeouts
)

type command struct {
	ph   phase
	msgs int64   // per producer; 0: until stop
	rate float64 // phLatency: messages a second, this producer
}

type result struct {
	sent int64
	err  error
}

// producer is one producer goroutine's state. Fields are owned by that
// goroutine while a command runs; the runner reads them only after the
// reply (the channel orders the accesses).
type producer struct {
	id   int
	task uint32 // the spout task its INITs name (see spoutTasker)
	s    sender
	// batched: hand each batch over with SendBatch then Flush (the net
	// level), instead of Send per message with the pipe's own publishing
	batched bool
	scratch []ackcore.Msg
	cur     *cursor
	clk     benchClock
	batch   int
	k       int
	warm    time.Duration
	base    time.Time

	stop atomic.Bool // set by the runner to end a timed phase
	cmds chan command
	res  chan result

	got  tally
	out  []ackcore.Outcome
	hist *hdrhistogram.Histogram
	lat  map[uint64]time.Duration // root -> when its last ACK was sent
	exp  expectation
}

func (pr *producer) loop() {
	for cmd := range pr.cmds {
		var r result
		switch cmd.ph {
		case phWarm:
			r = pr.warmUp()
		case phPeak:
			r = pr.peak(cmd.msgs)
		case phLatency:
			r = pr.throttled(cmd.msgs, cmd.rate)
		case phDrain:
			r = pr.drain()
		case phTimeouts:
			r = pr.waitFor(func() bool { return pr.got.completed()+pr.got.failed() >= pr.exp.roots })
		}
		pr.res <- r
	}
}

// sendAll sends msgs, naming this producer as their spout task: one
// message at a time, or (batched) all at once and flushed.
func (pr *producer) sendAll(msgs []ackcore.Msg) error {
	if pr.batched {
		pr.scratch = append(pr.scratch[:0], msgs...)
		for i := range pr.scratch {
			if pr.scratch[i].Kind == ackcore.Init {
				pr.scratch[i].Task = pr.task
			}
		}
		if err := pr.s.SendBatch(pr.scratch); err != nil {
			return err
		}
		if err := pr.s.Flush(); err != nil {
			return err
		}
		pr.clk.advance(len(msgs))
		return nil
	}
	for _, m := range msgs {
		if m.Kind == ackcore.Init {
			m.Task = pr.task
		}
		if err := pr.s.Send(m); err != nil {
			return err
		}
	}
	pr.clk.advance(len(msgs))
	return nil
}

// sendNext sends the cursor's next up to n messages and returns how many
// it sent: straight from the share's memory, one Send each, with only a
// faulted tree's messages rewritten on their way (cursor.span), so that
// fault mode costs the producer no copy of its batch, and a message left
// alone one byte's test (its act). Batched producers hand over a copy
// (sendAll).
func (pr *producer) sendNext(n int) (int, error) {
	if pr.batched || pr.cur.fs == nil {
		msgs, _ := pr.cur.next(n, false) // without faults, the share's own memory
		return len(msgs), pr.sendAll(msgs)
	}
	msgs, from, _ := pr.cur.span(n, false)
	acts := pr.cur.fs.acts[from : from+len(msgs)]
	sent := 0
	for i, m := range msgs {
		if a := acts[i]; a != 0 {
			ok, err := pr.sendHit(m, a)
			if err != nil {
				return sent, err
			}
			if ok {
				sent++
			}
			continue
		}
		if m.Kind == ackcore.Init {
			m.Task = pr.task
		}
		if err := pr.s.Send(m); err != nil {
			return sent, err
		}
		sent++
	}
	pr.clk.advance(sent)
	return sent, nil
}

// sendHit sends m, a message whose act a is set, rewritten (cursor.hit),
// unless a drops it, and reports whether it sent it. Out of line, so
// that sendNext's loop for the messages left alone is sendAll's.
//
//go:noinline
func (pr *producer) sendHit(m ackcore.Msg, a act) (bool, error) {
	if !pr.cur.hit(&m, a) {
		return false, nil
	}
	if m.Kind == ackcore.Init {
		m.Task = pr.task
	}
	return true, pr.s.Send(m)
}

// spoutTasker is a pipe whose producer p names its spout task otherwise
// than p: a netio client per producer owns one task, its task 0.
type spoutTasker interface{ SpoutTask(p int) uint32 }

func (pr *producer) poll() int {
	pr.out = pr.s.poll(pr.out[:0])
	pr.got.add(pr.out)
	return len(pr.out)
}

func (pr *producer) warmUp() result {
	var err error
	pr.cur.prefix(pr.batch, func(m []ackcore.Msg, _ []meta) {
		if err == nil {
			err = pr.sendAll(m)
			pr.poll()
		}
	})
	t0 := time.Now()
	for n := 0; err == nil && n < len(pr.cur.sh.cycle)/2 && time.Since(t0) < pr.warm; {
		var k int
		k, err = pr.sendNext(pr.batch)
		n += k
		pr.poll()
	}
	if err == nil {
		err = pr.s.Flush()
	}
	return result{err: err}
}

func (pr *producer) peak(msgs int64) result {
	var sent int64
	for !pr.stop.Load() && (msgs == 0 || sent < msgs) {
		want := pr.batch
		if msgs > 0 {
			want = int(min(int64(want), msgs-sent))
		}
		k, err := pr.sendNext(want)
		sent += int64(k)
		if err != nil {
			return result{sent: sent, err: err}
		}
		pr.poll()
	}
	return result{sent: sent, err: pr.s.Flush()}
}

// throttled sends at rate messages a second, in quanta of latencyQuantum,
// and times each root from its last ACK's send to its Completed's poll.
func (pr *producer) throttled(msgs int64, rate float64) result {
	if pr.lat == nil {
		pr.lat = make(map[uint64]time.Duration)
	}
	var sent int64
	t0 := time.Since(pr.base)
	for !pr.stop.Load() && (msgs == 0 || sent < msgs) {
		target := t0 + time.Duration(float64(sent)/rate*1e9)
		for {
			now := time.Since(pr.base)
			if now >= target || pr.stop.Load() {
				break
			}
			if pr.recordPoll() == 0 {
				if target-now > 200*time.Microsecond {
					time.Sleep(target - now - 100*time.Microsecond)
				} else {
					runtime.Gosched()
				}
			}
		}
		want := latencyQuantum
		if msgs > 0 {
			want = int(min(int64(want), msgs-sent))
		}
		batch, md := pr.cur.next(want, false)
		for i, m := range batch {
			if int(md[i].j) == pr.k-1 && m.Kind == ackcore.Ack {
				pr.lat[m.Root] = time.Since(pr.base)
			}
		}
		if err := pr.sendAll(batch); err != nil {
			return result{sent: sent, err: err}
		}
		if err := pr.s.Flush(); err != nil {
			return result{sent: sent, err: err}
		}
		sent += int64(len(batch))
		pr.recordPoll()
	}
	// Let the roots still in flight arrive, so that the last quanta are
	// timed too (a dropped root's entry waits for a timeout that the
	// stream clock will not reach here: hence the bounds).
	start := time.Now()
	for len(pr.lat) > 0 {
		waited := time.Since(start)
		if waited >= latencySettleEmpty || waited >= latencySettle && pr.hist.TotalCount() > 0 {
			break
		}
		if pr.recordPoll() == 0 {
			time.Sleep(20 * time.Microsecond)
		}
	}
	return result{sent: sent}
}

// recordPoll polls and times the completions of roots sent in the
// latency phase.
func (pr *producer) recordPoll() int {
	n := pr.poll()
	if n == 0 {
		return 0
	}
	now := time.Since(pr.base)
	for _, o := range pr.out {
		if t, ok := pr.lat[o.Root]; ok {
			if o.Kind == ackcore.Completed {
				record(pr.hist, now-t)
			}
			delete(pr.lat, o.Root)
		}
	}
	return n
}

func (pr *producer) drain() result {
	for !pr.cur.atRound() {
		msgs, _ := pr.cur.next(pr.batch, true)
		if err := pr.sendAll(msgs); err != nil {
			return result{err: err}
		}
		pr.poll()
	}
	pr.exp = expectation{roots: pr.cur.roots()}
	var err error
	pr.cur.drain(pr.batch, func(m []ackcore.Msg, _ []meta) {
		if err == nil {
			err = pr.sendAll(m)
			pr.poll()
		}
	})
	pr.exp.injFail, pr.exp.injDrop = pr.cur.injFail, pr.cur.injDrop
	if err == nil {
		err = pr.s.Flush()
	}
	if err != nil {
		return result{err: err}
	}
	// Every root but the dropped ones ends without a timeout.
	return pr.waitFor(func() bool {
		return pr.got.completed()+pr.got.explicit() >= pr.exp.roots-pr.exp.injDrop
	})
}

// waitFor polls until done or drainWait passes; the verification then
// says what is missing.
func (pr *producer) waitFor(done func() bool) result {
	deadline := time.Now().Add(drainWait)
	for !done() && time.Now().Before(deadline) {
		if pr.poll() == 0 {
			time.Sleep(50 * time.Microsecond)
		}
	}
	return result{}
}
