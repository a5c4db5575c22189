package topology

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/affinity"
	"github.com/xorack/xorack/internal/splitmix"
	"github.com/xorack/xorack/ring"
)

// Topology is a built topology: Start runs it, Stop stops it.
type Topology struct {
	cfg    Config
	comps  []*component // topological order
	byName map[string]*component

	execs         []*executor  // by global executor id
	spoutExecs    []*spoutExec // by spout executor index (the acker's receiver index)
	spoutExecByID []*spoutExec // by global executor id; nil for bolts
	boltExecs     []*boltExec
	spoutOf       []*spoutExec // by acker task
	runs          []func()     // by global executor id

	seed     uint64
	hashSeed maphash.Seed
	dropHook func(*Tuple) bool                 // tests: drop tuples in transit
	detect   func() (affinity.Topology, error) // the machine Pin plans on; tests inject one
	ackerCfg acker.Config                      // the in-process acker's, checked by Build

	stopping atomic.Bool // spouts: stop emitting, report every pending root
	draining atomic.Bool // spouts: stop calling Next

	quietLeft    atomic.Int32 // spout executors that have not stopped emitting
	quietCh      chan struct{}
	finishedLeft atomic.Int32 // spout executors not yet finished
	done         chan struct{}
	doneOnce     sync.Once
	haltOnce     sync.Once

	mu         sync.Mutex // guards the fields below
	started    bool
	stopped    bool
	port       acker.Port
	ackerFinal *ackcore.Stats
	haltErr    error // what stopped the topology (Config.PanicStops)
	errs       []error
	plan       affinity.Assignment
	wgs        []*sync.WaitGroup // by component, the executors running
}

func newTopology(cfg Config, comps []*component) (*Topology, error) {
	t := &Topology{cfg: cfg, comps: comps, byName: map[string]*component{}, seed: cfg.Seed,
		hashSeed: maphash.MakeSeed(), quietCh: make(chan struct{}), done: make(chan struct{}), detect: affinity.Detect}
	if t.seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		t.seed = binary.LittleEndian.Uint64(b[:]) | 1
	}
	ntasks := 0
	for i, c := range comps {
		c.index = i
		t.byName[c.name] = c
		for range c.ntasks {
			c.tasks = append(c.tasks, ntasks)
			ntasks++
		}
	}
	// Executors, their tasks, and the spout tasks' numbers at the acker.
	ackTasks := 0
	for _, c := range comps {
		for i := range c.nexec {
			lo, hi := i*c.ntasks/c.nexec, (i+1)*c.ntasks/c.nexec
			base := executor{top: t, comp: c, index: i, id: len(t.execs), tasks: c.tasks[lo:hi], batch: cfg.Batch, pub: &pubBox{}}
			base.gen.s = t.seed ^ uint64(base.id+1)*splitmix.Golden
			base.linkOf = make([]int32, ntasks)
			for k := range base.linkOf {
				base.linkOf[k] = -1
			}
			var e *executor
			if c.spout {
				spouts := make([]Spout, hi-lo)
				at := make([]uint32, hi-lo)
				for k := range spouts {
					spouts[k] = c.newSpout()
					if spouts[k] == nil {
						return nil, fmt.Errorf("topology: spout %q: constructor returned nil", c.name)
					}
					at[k] = uint32(ackTasks)
					ackTasks++
				}
				s := newSpoutExec(base, spouts, at, &t.cfg)
				for range at {
					t.spoutOf = append(t.spoutOf, s)
				}
				t.spoutExecs = append(t.spoutExecs, s)
				e = &s.executor
				t.runs = append(t.runs, s.run)
			} else {
				bolts := make([]Bolt, hi-lo)
				for k := range bolts {
					bolts[k] = c.newBolt()
					if bolts[k] == nil {
						return nil, fmt.Errorf("topology: bolt %q: constructor returned nil", c.name)
					}
				}
				b := newBoltExec(base, bolts, nil)
				t.boltExecs = append(t.boltExecs, b)
				e = &b.executor
				t.runs = append(t.runs, b.run)
			}
			c.execs = append(c.execs, e)
			t.execs = append(t.execs, e)
		}
	}
	t.spoutExecByID = make([]*spoutExec, len(t.execs))
	for _, s := range t.spoutExecs {
		t.spoutExecByID[s.id] = s
	}
	// Input rings: one per (upstream executor, bolt executor) pair.
	for _, b := range t.boltExecs {
		var ups []*executor
		seen := map[*component]bool{}
		for _, in := range b.comp.inputs {
			if from := in.from.comp; !seen[from] {
				seen[from] = true
				ups = append(ups, from.execs...)
			}
		}
		b.in = ring.NewFanIn[*Tuple](len(ups), cfg.RingSize, cfg.Batch, cfg.idle())
		for k, up := range ups {
			up.outs = append(up.outs, outLink{ring: b.in.Producer(k)})
			for _, task := range b.tasks {
				up.linkOf[task] = int32(len(up.outs) - 1)
			}
		}
	}
	// Routes: per emitter, per stream, per subscription.
	for _, e := range t.execs {
		e.routes = make([][]route, len(e.comp.streams))
		for si, st := range e.comp.streams {
			for _, sub := range st.subs {
				r := route{kind: sub.g.kind, fields: sub.fieldIdx}
				tasks := sub.to.tasks
				if sub.g.kind == groupLocal {
					tasks = sub.to.execs[e.index%len(sub.to.execs)].tasks
				}
				for _, task := range tasks {
					r.tasks = append(r.tasks, int32(task))
				}
				r.rr = int(e.gen.next() % uint64(len(r.tasks)))
				e.routes[si] = append(e.routes[si], r)
			}
		}
	}
	t.quietLeft.Store(int32(len(t.spoutExecs)))
	t.finishedLeft.Store(int32(len(t.spoutExecs)))
	return t, nil
}

// spec is the acker shape the topology needs: one sender per executor,
// one task per spout task, one inbox per spout executor.
func (t *Topology) spec() acker.Spec {
	recvOf := make([]int, len(t.spoutOf))
	idx := map[*spoutExec]int{}
	for i, s := range t.spoutExecs {
		idx[s] = i
	}
	for task, s := range t.spoutOf {
		recvOf[task] = idx[s]
	}
	return acker.Spec{Producers: len(t.execs), Tasks: len(t.spoutOf), Receivers: len(t.spoutExecs),
		ReceiverOf: func(task int) int { return recvOf[task] }}
}

// inProcess reports whether the topology runs an in-process acker.
func (t *Topology) inProcess() bool { return t.cfg.acking() && t.cfg.Port == nil }

// progressCap is the in-process acker's ProgressCap: ResetCap, the most a
// tree's progress may extend it, 0 without ProgressTimeout.
func (t *Topology) progressCap() time.Duration {
	if !t.cfg.ProgressTimeout {
		return 0
	}
	return min(t.cfg.ResetCap, ackcore.MaxTimeout)
}

// planner is the one CPU planner of a pinned topology, nil when nothing is
// pinned, the machine cannot be described, or the threads to pin
// outnumber the allowed CPUs (the reason is in Plan's Note; the in-process
// acker then pins nothing either: its Pin is cleared).
func (t *Topology) planner() *affinity.Planner {
	shards, execs := 0, 0
	if t.inProcess() && t.ackerCfg.Pin {
		shards = max(t.ackerCfg.Shards, 1)
	}
	if t.cfg.Pin {
		execs = len(t.execs)
	}
	if shards+execs == 0 {
		return nil
	}
	topo, err := t.detect()
	if err != nil {
		t.plan.Note = "unpinned: " + err.Error()
		return nil
	}
	// A pinned goroutine keeps its OS thread, so each time it waits Go
	// hands its processor to another thread and back: pinned threads that
	// share a CPU run slower than unpinned ones, which the scheduler
	// moves. ackbench's word count at topology level (a shard and three
	// executors on 2 CPUs) ran 1.2-1.6x the trees a second unpinned.
	if cpus := len(topo.Allowed); shards+execs > cpus { // Allowed is sorted, without duplicates
		t.plan.Note = fmt.Sprintf("unpinned: %d threads to pin (%d acker shards, %d executors) and %d allowed CPUs; pinned threads that share a CPU run slower than unpinned ones", shards+execs, shards, execs, cpus)
		t.ackerCfg.Pin = false // Start runs once: openPort reads it next
		return nil
	}
	return affinity.NewPlanner(topo)
}

// ackerConfig is the in-process acker's configuration: Config.Acker with
// the port shape, the topology's timeouts, clock and seed, and the
// defaults the topology picks, checked as acker.New checks it.
func (t *Topology) ackerConfig() (acker.Config, error) {
	spec := t.spec()
	cfg := t.cfg.Acker
	cfg.Producers, cfg.Tasks, cfg.Receivers, cfg.ReceiverOf = spec.Producers, spec.Tasks, spec.Receivers, spec.ReceiverOf
	if cfg.Shard.MaxPending == 0 {
		total := len(t.spoutOf) * t.cfg.MaxSpoutPending
		cfg.Shard.MaxPending = min(2*total/cfg.Shards+1024, ackcore.MaxPendingLimit)
	}
	if cfg.Shard.Seed == 0 {
		cfg.Shard.Seed = t.seed
	}
	cfg.Shard.Timeout, cfg.Shard.Clock = t.cfg.MessageTimeout, t.cfg.Clock
	// Config.ProgressTimeout: the in-process acker moves the deadline on
	// every ACK itself (one store); the bolts send no RESETs
	// (boltExec.progressAfter).
	cfg.Shard.ProgressTimeout, cfg.Shard.ProgressCap = t.cfg.ProgressTimeout, t.progressCap()
	cfg.Pin = cfg.Pin || t.cfg.Pin
	if cfg.Idle == nil {
		// The acker's executors wait as the engine's do (Config.idle),
		// not with the acker's own default.
		idle := t.cfg.idle()
		cfg.Idle = &idle
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("topology: Acker: %w", err)
	}
	return cfg, nil
}

// openPort opens the acker: Config.Port's, or an in-process acker.Acker
// whose shards, with Pin, take their CPUs from planner first.
func (t *Topology) openPort(planner *affinity.Planner) (acker.Port, error) {
	spec := t.spec()
	if t.cfg.Port != nil {
		p, err := t.cfg.Port(spec)
		if err != nil {
			return nil, fmt.Errorf("topology: opening the acker port: %w", err)
		}
		return p, nil
	}
	cfg := t.ackerCfg
	cfg.Planner = planner
	a, err := acker.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	if err := a.Start(); err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	return a, nil
}

// Start opens the acker (unless at most once), opens every spout and bolt
// (Opener), and starts the executors. A topology runs once.
func (t *Topology) Start() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started {
		return errors.New("topology: Start called twice")
	}
	t.started = true
	// One planner for every pinned thread: the acker's shards take their
	// CPUs first, the executors the next ones, so none shares a CPU while
	// allowed CPUs remain.
	planner := t.planner()
	if t.cfg.acking() {
		p, err := t.openPort(planner)
		if err != nil {
			return err
		}
		t.port = p
		for _, e := range t.execs {
			e.sender = p.Sender(e.id)
		}
		for i, s := range t.spoutExecs {
			s.inbox = p.Inbox(i)
		}
	}
	// The tasks opened so far, closed (last first) if a later Open fails:
	// a spout's client or a bolt's connection is not left behind.
	type openTask struct {
		c    *component
		task int
		io.Closer
	}
	var opened []openTask
	for _, c := range t.comps {
		for _, e := range c.execs {
			for k, task := range e.tasks {
				var inst any
				if s := t.spoutExecByID[e.id]; s != nil {
					inst = s.spouts[k]
				} else {
					inst = t.boltOf(e).bolts[k]
				}
				if o, ok := inst.(Opener); ok {
					ctx := TaskContext{Component: c.name, Task: task, Index: task - c.tasks[0], topo: t}
					if err := callSafe(c, task, "Open", func() error { return o.Open(ctx) }); err != nil {
						if t.port != nil {
							go t.port.Stop() // nothing polls: outcomes are none yet
						}
						if _, ok := err.(*PanicError); ok {
							e.m.Panics++
							e.publish()
						} else {
							err = fmt.Errorf("topology: %s %q task %d: Open: %w", c.kind(), c.name, task, err)
						}
						errs := []error{err}
						for i := len(opened) - 1; i >= 0; i-- {
							o := opened[i]
							errs = append(errs, closeTask(o.c, o.task, o.Closer))
						}
						return errors.Join(errs...)
					}
				}
				if cl, ok := inst.(io.Closer); ok {
					opened = append(opened, openTask{c, task, cl})
				}
			}
		}
	}
	if planner != nil && t.cfg.Pin {
		t.plan = planner.Take(len(t.execs))
	}
	t.wgs = make([]*sync.WaitGroup, len(t.comps))
	for _, c := range t.comps {
		wg := &sync.WaitGroup{}
		t.wgs[c.index] = wg
		for _, e := range c.execs {
			wg.Add(1)
			run := t.runs[e.id]
			cpu := -1
			if e.id < len(t.plan.CPUs) {
				cpu = t.plan.CPUs[e.id]
			}
			go func() {
				if cpu >= 0 {
					if unpin, err := affinity.Pin(cpu); err == nil {
						defer unpin()
					}
				}
				run()
			}()
		}
	}
	if len(t.spoutExecs) == 0 {
		t.closeDone()
	}
	return nil
}

func (t *Topology) boltOf(e *executor) *boltExec {
	for _, b := range t.boltExecs {
		if &b.executor == e {
			return b
		}
	}
	return nil
}

func (t *Topology) execDone(e *executor) { t.wgs[e.comp.index].Done() }

func (t *Topology) noteErr(err error) {
	t.mu.Lock()
	t.errs = append(t.errs, err)
	t.mu.Unlock()
}

func (t *Topology) spoutQuiet() {
	if t.quietLeft.Add(-1) == 0 {
		close(t.quietCh)
	}
}

func (t *Topology) spoutFinished() {
	if t.finishedLeft.Add(-1) == 0 {
		t.closeDone()
	}
}

func (t *Topology) closeDone() { t.doneOnce.Do(func() { close(t.done) }) }

// halt stops the topology for err (a panic, with Config.PanicStops): the
// spouts stop emitting and replaying, as at the start of Stop, and Done
// is closed with err as Err. Any goroutine; the first call counts.
func (t *Topology) halt(err error) {
	t.haltOnce.Do(func() {
		t.mu.Lock()
		t.haltErr = err
		t.mu.Unlock()
		t.stopping.Store(true)
		for _, s := range t.spoutExecs {
			s.poke()
		}
		t.closeDone()
	})
}

// Err is why Done was closed early: the *PanicError that stopped the
// topology (Config.PanicStops), or nil.
func (t *Topology) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.haltErr
}

// Done is closed once every spout task has called Done (or Drain was
// called) and every tracked root has ended (completed, dead-lettered or
// failed for good), or when a panic stopped the topology
// (Config.PanicStops; Err says so). At most once, nothing is tracked: it is closed once
// the spouts are done, and Stop then delivers what is in flight.
func (t *Topology) Done() <-chan struct{} { return t.done }

// Drain stops asking spouts for tuples and waits until nothing is pending
// (Done), or ctx ends.
func (t *Topology) Drain(ctx context.Context) error {
	t.draining.Store(true)
	for _, s := range t.spoutExecs {
		s.poke()
	}
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("topology: drain: %w", ctx.Err())
	}
}

// Stop stops the topology. First it drains: the spouts are no longer
// asked for messages (Next is not called again) and Stop waits, until ctx
// ends, for the pending trees to finish (replays included), so a clean
// stop leaves nothing to reprocess. Then the spouts stop emitting and
// replaying; the acker is stopped, which reports every root still
// pending as failed (ackcore.ReasonStopped), and the spouts report each to
// their Fail (roots waiting for a replay, and any the acker never saw,
// too): no message is left without a final outcome. Then the bolts are
// stopped in topological order, each after executing what was already
// queued for it, and every spout and bolt is closed. If a bolt does not
// return from Execute before ctx ends (or, when the drain used ctx up,
// within a grace of 5 s after), Stop returns an error naming it (its
// goroutine is left behind). Stop returns the errors of Close calls too,
// and the panic that stopped the topology (Config.PanicStops). An
// already-ended ctx skips the drain.
func (t *Topology) Stop(ctx context.Context) error {
	t.mu.Lock()
	if !t.started || t.stopped {
		t.mu.Unlock()
		return errors.New("topology: Stop without a running topology")
	}
	t.stopped = true
	port := t.port
	t.mu.Unlock()

	if ctx.Err() == nil {
		_ = t.Drain(ctx) // until nothing is pending, or ctx ends
	}
	if ctx.Err() != nil {
		// The drain used ctx up: the bolts still get stopGrace to execute
		// what is queued for them.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), stopGrace)
		defer cancel()
	}
	t.stopping.Store(true)
	for _, s := range t.spoutExecs {
		s.poke()
	}
	<-t.quietCh // the spouts no longer emit: their executors only take outcomes now
	if port != nil {
		st := port.Stop() // reports the pending roots; the spouts take them
		t.mu.Lock()
		t.ackerFinal = &st
		t.mu.Unlock()
	}
	var errs []error
	for _, c := range t.comps {
		if !c.spout {
			for _, e := range c.execs {
				t.boltOf(e).in.Close()
			}
		}
		wait := make(chan struct{})
		go func() { t.wgs[c.index].Wait(); close(wait) }()
		select {
		case <-wait:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("topology: stop: %s %q did not finish (%w); is an Execute blocked?", c.kind(), c.name, ctx.Err()))
		}
		if len(errs) > 0 {
			break
		}
	}
	t.mu.Lock()
	errs = append(errs, t.haltErr)
	errs = append(errs, t.errs...)
	t.mu.Unlock()
	return errors.Join(errs...)
}

// stopGrace is how long Stop waits for the bolts to execute what is
// queued for them when its context ended during the drain.
const stopGrace = 5 * time.Second

// Plan is the executors' CPU assignment when Config.Pin is set. The
// executors take their CPUs from the same affinity.Planner as the
// in-process acker's shards, after them: while allowed CPUs remain, no
// executor shares a CPU with a shard or another executor (the acker's own
// Plan lists the shards').
func (t *Topology) Plan() affinity.Assignment {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.plan
}
