package acker

import (
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/affinity"
	"github.com/xorack/xorack/ring"
)

// Config configures a sharded acker.
type Config struct {
	// Shards is the number of shards, each run by one executor goroutine
	// (pinned to a CPU when Pin is set). Default 1.
	Shards int
	// Producers is the number of producer handles: each is used by one
	// goroutine (a spout or bolt executor of the embedding engine) and has
	// one SPSC ring into every shard. Required.
	Producers int
	// Tasks is the number of spout tasks; task t's outcomes arrive at
	// TaskReceiver(t). INITs must name a task below it. Required.
	Tasks int
	// Receivers is the number of outcome receivers, each with one ring
	// from every shard and polled by one goroutine; task t's outcomes go
	// to receiver ReceiverOf(t), which TaskReceiver(t) returns. Default Tasks:
	// one receiver per task. An engine whose executors each run several
	// spout tasks (as Storm's do) gives each executor one receiver: the
	// shards then publish one span per executor per batch, not one per
	// task, and the executor polls one handle.
	Receivers int
	// ReceiverOf maps a task to its receiver in [0, Receivers); nil means
	// task mod Receivers. It is called once per task by New.
	ReceiverOf func(task int) int
	// Shard configures each shard; MaxPending is per shard. Its Clock is
	// the source the executors sample once per pass (nil: monotonic).
	Shard ackcore.Config
	// RingSize is each producer->shard ring's capacity (a power of two);
	// default 4096.
	RingSize int
	// OutcomeRingSize is each shard->spout ring's capacity (a power of
	// two); default 4096.
	OutcomeRingSize int
	// Batch is the most messages a shard takes from one producer ring per
	// pass, for fairness between producers; default 256.
	Batch int
	// Pin pins each executor to a CPU chosen by affinity.Plan.
	Pin bool
	// Idle is how executors, blocked producers and waiting receivers
	// wait; nil means ring.DefaultIdle().
	Idle *ring.Idle
}

func (c *Config) fill() error {
	if c.Shards == 0 {
		c.Shards = 1
	}
	if c.RingSize == 0 {
		c.RingSize = 4096
	}
	if c.OutcomeRingSize == 0 {
		c.OutcomeRingSize = 4096
	}
	if c.Batch == 0 {
		c.Batch = 256
	}
	if c.Receivers == 0 && c.Tasks > 0 {
		c.Receivers = c.Tasks
	}
	switch {
	case c.Shards < 1 || c.Shards > 1024:
		return fmt.Errorf("acker: Shards %d out of range [1, 1024]", c.Shards)
	case c.Producers < 1 || c.Producers > 4096:
		return fmt.Errorf("acker: Producers %d out of range [1, 4096]", c.Producers)
	case c.Tasks < 1 || c.Tasks > ackcore.MaxTask+1:
		return fmt.Errorf("acker: Tasks %d out of range [1, %d]", c.Tasks, ackcore.MaxTask+1)
	case c.Receivers < 0 || c.Receivers > c.Tasks:
		return fmt.Errorf("acker: Receivers %d out of range [1, Tasks %d] (0: Tasks)", c.Receivers, c.Tasks)
	case c.RingSize < 2 || c.RingSize&(c.RingSize-1) != 0:
		return fmt.Errorf("acker: RingSize %d is not a power of two >= 2", c.RingSize)
	case c.OutcomeRingSize < 2 || c.OutcomeRingSize&(c.OutcomeRingSize-1) != 0:
		return fmt.Errorf("acker: OutcomeRingSize %d is not a power of two >= 2", c.OutcomeRingSize)
	case c.Batch < 1:
		return fmt.Errorf("acker: Batch %d below 1", c.Batch)
	}
	if c.Shard.Clock == nil {
		c.Shard.Clock = ackcore.NewMonotonicClock()
	}
	return c.Shard.Validate()
}

// ErrClosed is returned by producers once the acker is stopping.
var ErrClosed = errors.New("acker: acker stopped")

// Acker is the sharded, concurrent acker: N single-writer shards, each run
// by an executor goroutine fed by one SPSC ring per producer, reporting
// outcomes into one SPSC ring per (shard, spout task). No locks and no
// shared writes on the message path. See the package doc.
type Acker struct {
	cfg       Config
	execs     []*executor
	producers []*Producer
	recvs     []*Receiver // by receiver index
	recvOf    []uint32    // recvOf[t]: task t's receiver
	plan      affinity.Assignment

	mu      sync.Mutex // guards started, stopped
	started bool
	stopped bool
	wg      sync.WaitGroup
}

// New builds the acker and allocates every shard's table; Start runs it.
func New(cfg Config) (*Acker, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	idle := ring.DefaultIdle()
	if cfg.Idle != nil {
		idle = *cfg.Idle
	}
	a := &Acker{cfg: cfg, recvOf: make([]uint32, cfg.Tasks)}
	for t := range a.recvOf {
		r := t % cfg.Receivers
		if cfg.ReceiverOf != nil {
			r = cfg.ReceiverOf(t)
		}
		if r < 0 || r >= cfg.Receivers {
			return nil, fmt.Errorf("acker: ReceiverOf(%d) = %d, out of range [0, Receivers %d)", t, r, cfg.Receivers)
		}
		a.recvOf[t] = uint32(r)
	}
	a.recvs = make([]*Receiver, cfg.Receivers)
	for r := range a.recvs {
		a.recvs[r] = &Receiver{in: ring.NewFanInWithIdle[ackcore.Outcome](cfg.Shards, cfg.OutcomeRingSize, cfg.OutcomeRingSize, idle)}
	}
	for i := 0; i < cfg.Shards; i++ {
		scfg := cfg.Shard
		e := &executor{
			id:     i,
			clock:  cfg.Shard.Clock,
			in:     ring.NewFanInWithIdle[ackcore.Msg](cfg.Producers, cfg.RingSize, cfg.Batch, idle),
			outs:   make([]*ring.SPSC[ackcore.Outcome], cfg.Receivers),
			over:   make([][]ackcore.Outcome, cfg.Receivers),
			recvOf: a.recvOf,
			cpu:    -1,
		}
		scfg.Clock = &e.coarse
		if scfg.Seed != 0 {
			scfg.Seed += uint64(i) * 0x9e3779b97f4a7c15 // shards hash differently
		}
		sh, err := ackcore.NewShard(scfg)
		if err != nil {
			return nil, err
		}
		e.shard = sh
		for r := range e.outs {
			e.outs[r] = a.recvs[r].in.Producer(i)
		}
		a.execs = append(a.execs, e)
	}
	a.producers = make([]*Producer, cfg.Producers)
	for p := range a.producers {
		pr := &Producer{tasks: uint32(cfg.Tasks), nshards: uint64(cfg.Shards), batch: cfg.Batch}
		for _, e := range a.execs {
			pr.rings = append(pr.rings, e.in.Producer(p))
		}
		pr.spans = make([][]ackcore.Msg, cfg.Shards)
		pr.fill = make([]int, cfg.Shards)
		a.producers[p] = pr
	}
	return a, nil
}

// Producer returns producer handle i; each handle belongs to one goroutine.
func (a *Acker) Producer(i int) *Producer { return a.producers[i] }

// TaskReceiver returns the receiver of spout task t's outcomes, which it
// shares with the other tasks mapped to it (Config.Receivers). One
// goroutine polls a receiver: with fewer receivers than tasks, poll each
// Receiver once, not each task's TaskReceiver.
func (a *Acker) TaskReceiver(t int) *Receiver { return a.recvs[a.recvOf[t]] }

// Receiver returns outcome receiver r, in [0, Receivers()).
func (a *Acker) Receiver(r int) *Receiver { return a.recvs[r] }

// Receivers is the number of outcome receivers.
func (a *Acker) Receivers() int { return len(a.recvs) }

// ReceiverOf is the receiver task t's outcomes go to.
func (a *Acker) ReceiverOf(t int) int { return int(a.recvOf[t]) }

// Plan is the executors' CPU assignment (its CPUs are set after Start with
// Pin). Its Note also says, pinned or not, when executors and producers
// alone outnumber GOMAXPROCS; goroutines waiting on receivers come on top.
func (a *Acker) Plan() affinity.Assignment { return a.plan }

// ShardCPUs reports the CPU each executor last saw itself on (-1: unknown).
func (a *Acker) ShardCPUs() []int {
	cpus := make([]int, len(a.execs))
	for i, e := range a.execs {
		e.mu.Lock()
		cpus[i] = e.cpu
		e.mu.Unlock()
	}
	return cpus
}

// Start launches one executor goroutine per shard. With Pin, each pins
// itself to its planned CPU; a failure to pin leaves it unpinned and is
// reported by Plan().Note.
func (a *Acker) Start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started {
		return errors.New("acker: Start called twice")
	}
	a.started = true
	if a.cfg.Pin {
		topo, err := affinity.Detect()
		if err != nil {
			a.plan.Note = "unpinned: " + err.Error()
		} else {
			a.plan = affinity.Plan(len(a.execs), topo)
		}
	}
	if procs := runtime.GOMAXPROCS(0); len(a.execs)+len(a.producers) > procs {
		if a.plan.Note != "" {
			a.plan.Note += "; "
		}
		a.plan.Note += fmt.Sprintf("%d executors and %d producers exceed GOMAXPROCS %d: while they all spin, "+
			"a goroutine woken onto a busy executor's processor waits for it to yield (milliseconds; see the package doc, Concurrency)",
			len(a.execs), len(a.producers), procs)
	}
	for i, e := range a.execs {
		cpu := -1
		if a.cfg.Pin && i < len(a.plan.CPUs) {
			cpu = a.plan.CPUs[i]
		}
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			e.run(cpu)
		}()
	}
	return nil
}

// Stop stops the acker gracefully. Call it after the producers' last
// Flush: a Flush racing with Stop may find the rings closed (and say so).
// Producers' further sends fail with
// ErrClosed, every message already sent is applied, every root still
// pending with an INIT is reported Failed{stopped} to its spout (so it can
// be replayed), and the executors exit. Stop waits for the receivers to
// take those outcomes, so something must keep polling them while it runs:
// call Stop from a goroutine other than the ones that poll, and have those
// poll until Wait returns false. Stop returns the final exact counters.
func (a *Acker) Stop() ackcore.Stats {
	a.mu.Lock()
	if !a.started || a.stopped {
		a.mu.Unlock()
		return a.Stats()
	}
	a.stopped = true
	a.mu.Unlock()
	for _, e := range a.execs {
		e.in.Close()
	}
	a.wg.Wait()
	for _, s := range a.recvs {
		s.in.Close()
	}
	return a.Stats()
}

// Stats aggregates the shards' counters. While running, each shard's part
// is the snapshot its executor published at its last tick (at most a tick
// old); after Stop it is exact.
func (a *Acker) Stats() ackcore.Stats {
	var st ackcore.Stats
	for _, e := range a.execs {
		e.mu.Lock()
		st.Add(e.snap)
		e.mu.Unlock()
	}
	return st
}

// shardOf is the shard owning root (SEMANTICS rule 9): a multiply-xorshift
// mix reduced by fast range, independent of the shards' own seeded hashes.
func shardOf(root, n uint64) uint64 {
	h := root * 0x9e3779b97f4a7c15
	h ^= h >> 29
	s, _ := bits.Mul64(h, n)
	return s
}

// Producer sends messages to the shards. It stages messages in place in
// each shard's ring and publishes a shard's staged span when it fills
// (Batch messages) or on Flush: one atomic store per span, not per message.
// Not safe for concurrent use: one goroutine per Producer.
type Producer struct {
	rings   []*ring.SPSC[ackcore.Msg] // rings[s]: this producer's ring into shard s
	spans   [][]ackcore.Msg           // reserved, partly filled span per shard
	fill    []int                     // messages staged in spans[s]
	tasks   uint32
	nshards uint64
	batch   int
}

// Send stages m for its shard, waiting (with the idle strategy) while that
// shard's ring is full: backpressure, never loss. Staged messages are
// published when a span fills or on Flush; call Flush before waiting for
// outcomes. It returns ErrClosed once the acker stops, and an error naming
// the value for an INIT whose task the acker does not have; other malformed messages
// are refused by the shard (Refused{invalid}, counted).
func (p *Producer) Send(m ackcore.Msg) error {
	_, err := p.stage(m, true)
	return err
}

// SendBatch is Send for each of msgs in order. It checks every INIT's task
// first and stages nothing if one is out of range (the error names it);
// with one shard it copies runs of messages into the ring span at once.
func (p *Producer) SendBatch(msgs []ackcore.Msg) error {
	for i := range msgs {
		if m := &msgs[i]; m.Kind == ackcore.Init && m.Task >= p.tasks {
			return fmt.Errorf("acker: message %d: INIT root %#x names task %d, acker has %d tasks", i, m.Root, m.Task, p.tasks)
		}
	}
	if p.nshards > 1 {
		for i := range msgs {
			if _, err := p.stage(msgs[i], true); err != nil {
				return err
			}
		}
		return nil
	}
	r := p.rings[0]
	for len(msgs) > 0 {
		if r.Closed() {
			return ErrClosed
		}
		if p.fill[0] == len(p.spans[0]) {
			if p.fill[0] > 0 {
				r.Commit(p.fill[0])
			}
			p.spans[0], p.fill[0] = r.ReserveWait(p.batch), 0
			if len(p.spans[0]) == 0 {
				return ErrClosed
			}
		}
		n := copy(p.spans[0][p.fill[0]:], msgs)
		p.fill[0] += n
		msgs = msgs[n:]
	}
	return nil
}

// TrySend is Send without waiting: false when m's shard ring is full (or
// the acker stopped), with m not sent.
func (p *Producer) TrySend(m ackcore.Msg) (bool, error) { return p.stage(m, false) }

// stage puts m in its shard's span, reserving a new span (waiting for room
// if wait) when the current one is full, after publishing it.
func (p *Producer) stage(m ackcore.Msg, wait bool) (bool, error) {
	if m.Kind == ackcore.Init && m.Task >= p.tasks {
		return false, fmt.Errorf("acker: INIT root %#x names task %d, acker has %d tasks", m.Root, m.Task, p.tasks)
	}
	s := shardOf(m.Root, p.nshards)
	r := p.rings[s]
	if r.Closed() {
		return false, ErrClosed
	}
	if p.fill[s] == len(p.spans[s]) {
		if p.fill[s] > 0 {
			r.Commit(p.fill[s])
		}
		if wait {
			p.spans[s] = r.ReserveWait(p.batch)
		} else {
			p.spans[s] = r.Reserve(p.batch)
		}
		p.fill[s] = 0
		if len(p.spans[s]) == 0 {
			if wait || r.Closed() {
				return false, ErrClosed
			}
			return false, nil
		}
	}
	p.spans[s][p.fill[s]] = m
	p.fill[s]++
	return true, nil
}

// Flush publishes every staged message. Messages staged but not flushed
// when the acker stops are not applied: Flush then returns an error saying
// how many, so none is lost without a word.
func (p *Producer) Flush() error {
	lost := 0
	for s, n := range p.fill {
		if n > 0 {
			if p.rings[s].Closed() {
				lost += n
			} else {
				p.rings[s].Commit(n)
			}
			p.spans[s] = nil // a Commit ends the reservation; Send reserves anew
			p.fill[s] = 0
		}
	}
	if lost > 0 {
		return fmt.Errorf("%w: %d staged messages not applied", ErrClosed, lost)
	}
	return nil
}

// Receiver receives, from every shard, the outcomes of the roots of the spout
// tasks mapped to it (one task unless Config.Receivers groups
// them; ackcore.Outcome.Task says whose). One goroutine polls it.
type Receiver struct {
	in *ring.FanIn[ackcore.Outcome]
}

// Poll appends the outcomes available now to dst, without waiting.
func (s *Receiver) Poll(dst []ackcore.Outcome) []ackcore.Outcome {
	s.in.Drain(func(_ int, items []ackcore.Outcome) { dst = append(dst, items...) })
	return dst
}

// Wait appends at least one outcome to dst, waiting with the idle strategy;
// ok is false once the acker has stopped and every outcome was taken.
func (s *Receiver) Wait(dst []ackcore.Outcome) (_ []ackcore.Outcome, ok bool) {
	n := s.in.DrainWait(func(_ int, items []ackcore.Outcome) { dst = append(dst, items...) })
	return dst, n > 0
}

// WaitUntil is Wait that also returns when wake fires, with whatever it
// has then (possibly nothing); ok is false once the acker has stopped and
// every outcome was taken.
func (s *Receiver) WaitUntil(dst []ackcore.Outcome, wake <-chan time.Time) (_ []ackcore.Outcome, ok bool) {
	n, _ := s.in.DrainWaitUntil(func(_ int, items []ackcore.Outcome) { dst = append(dst, items...) }, wake)
	return dst, n > 0 || !s.in.Closed()
}

// Run calls fn for each outcome until the acker has stopped and every
// outcome was delivered (the callback style).
func (s *Receiver) Run(fn func(ackcore.Outcome)) {
	for s.in.DrainWait(func(_ int, items []ackcore.Outcome) {
		for _, o := range items {
			fn(o)
		}
	}) > 0 {
	}
}

// coarseClock is the executor's loop-sampled clock: the shard reads it per
// Apply, the loop sets it once per pass. Both run on the executor's
// goroutine, so it needs no synchronisation.
type coarseClock struct{ now time.Duration }

func (c *coarseClock) Now() time.Duration { return c.now }

// executor runs one shard.
type executor struct {
	id     int
	shard  *ackcore.Shard
	clock  ackcore.Clock // the real clock, sampled once per pass
	coarse coarseClock   // what the shard reads
	in     *ring.FanIn[ackcore.Msg]
	outs   []*ring.SPSC[ackcore.Outcome] // outs[r]: into receiver r's fan-in
	over   [][]ackcore.Outcome           // over[r]: outcomes for receiver r not yet in its ring
	nover  int                           // outcomes in over
	dirty  []uint32                      // the receivers whose over is not empty
	recvOf []uint32                      // task -> receiver (Acker.recvOf)
	out    []ackcore.Outcome

	mu   sync.Mutex // guards snap, cpu
	snap ackcore.Stats
	cpu  int
}

func (e *executor) run(cpu int) {
	if cpu >= 0 {
		if unpin, err := affinity.Pin(cpu); err == nil {
			defer unpin()
		}
	}
	if c, err := affinity.CurrentCPU(); err == nil {
		e.mu.Lock()
		e.cpu = c
		e.mu.Unlock()
	}
	tick := e.shard.Tick()
	timer := time.NewTimer(tick)
	defer timer.Stop()
	e.out = make([]ackcore.Outcome, 0, 1024)
	apply := func(_ int, items []ackcore.Msg) {
		e.out = e.shard.Apply(items, e.out[:0])
		e.route()
	}
	e.coarse.now = e.clock.Now()
	nextTick := e.coarse.now + tick
	for {
		got, fired := e.in.DrainWaitUntil(apply, timer.C)
		e.coarse.now = e.clock.Now()
		if fired || e.coarse.now >= nextTick {
			// A tick: expire, retry held outcomes, publish counters, and
			// re-arm the timer (Reset also re-arms one that fired unseen).
			e.expire()
			e.flushOver()
			e.publish()
			nextTick = e.coarse.now + tick
			timer.Reset(tick)
		}
		if got == 0 && !fired && e.in.Closed() {
			break
		}
	}
	// Stopping: everything sent has been applied. Fail what is pending.
	e.out = e.shard.StopAll(e.out[:0])
	e.route()
	for e.nover > 0 {
		e.flushOverWait()
	}
	e.publish()
}

func (e *executor) expire() {
	for {
		var more bool
		e.out, more = e.shard.Expire(e.out[:0])
		e.route()
		if !more {
			return
		}
	}
}

// route hands each outcome to its receiver's ring: it collects a batch's
// outcomes per receiver and publishes each receiver's share with one
// PushBatch (one atomic store per ring and batch, not per outcome). A full
// ring never blocks the shard (a spout blocked sending to this shard would
// deadlock it): what it cannot take waits in over, bounded by the roots the
// shard can hold, and goes first on later passes. Outcomes with no task
// (refused ACK/FAIL/RESET) are counted in ackcore.Stats and not routed.
func (e *executor) route() {
	for _, o := range e.out {
		if o.Task >= uint32(len(e.recvOf)) {
			continue
		}
		r := e.recvOf[o.Task]
		if len(e.over[r]) == 0 {
			e.dirty = append(e.dirty, r)
		}
		e.over[r] = append(e.over[r], o)
		e.nover++
	}
	e.flushOver()
}

// flushOver pushes what each dirty receiver's ring takes now.
func (e *executor) flushOver() {
	keep := e.dirty[:0]
	woke := false
	for _, r := range e.dirty {
		q := e.over[r]
		woke = woke || e.outs[r].ConsumerParked()
		n := e.outs[r].PushBatch(q)
		e.nover -= n
		if e.over[r] = append(q[:0], q[n:]...); len(e.over[r]) > 0 {
			keep = append(keep, r)
		}
	}
	e.dirty = keep
	if woke {
		// A woken spout goroutine is queued on this executor's processor,
		// behind this loop, which does not block while there is work: let
		// it run now instead of at the next preemption (10 ms).
		runtime.Gosched()
	}
}

// flushOverWait is flushOver that waits for each spout to take its share.
func (e *executor) flushOverWait() {
	for _, r := range e.dirty {
		q := e.over[r]
		for len(q) > 0 {
			n := e.outs[r].PushBatch(q)
			if n == 0 {
				if !e.outs[r].Push(q[0]) {
					e.nover -= len(q) // spout ring closed: nobody will read
					break
				}
				n = 1
			}
			q = q[n:]
			e.nover -= n
		}
		e.over[r] = e.over[r][:0]
	}
	e.dirty = e.dirty[:0]
}

func (e *executor) publish() {
	st := e.shard.Stats()
	e.mu.Lock()
	e.snap = st
	e.mu.Unlock()
}
