package acker

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/affinity"
	"github.com/xorack/xorack/ring"
)

// ErrClosed is returned by producers once the acker is stopping.
var ErrClosed = errors.New("acker: acker stopped")

// Acker is the sharded, concurrent acker: N single-writer shards, each run
// by an executor goroutine fed by one SPSC ring per producer, reporting
// outcomes into one SPSC ring per (shard, receiver). No locks and no
// shared writes on the message path. See the package doc.
type Acker struct {
	cfg       Config
	foot      Footprint
	execs     []*executor
	producers []*Producer
	recvs     []*Receiver // by receiver index
	recvOf    []uint32    // recvOf[t]: task t's receiver
	epoch     time.Time   // New's time: receivers' take times count from it

	mu       sync.Mutex // guards plan, started, stopped, stopDone
	plan     affinity.Assignment
	baseNote string // the CPU assignment's own note, immutable after New
	started  bool
	stopped  bool
	wg       sync.WaitGroup
	log      *slog.Logger // Config.Logger or slog.Default(); immutable after New

	// running is set by Start, once; producers look at it on their first
	// send. stopDone is closed when the first Stop returns, stopErr
	// (written before) is its error.
	running  atomic.Bool
	stopDone chan struct{}
	stopErr  error
	// counted is set once Stop has counted the producers' unpublished
	// spans (stopError), after the executors exited: from then on the
	// shards' applied counts are final, and NotApplied reads them.
	counted atomic.Bool

	oldMu sync.Mutex // serialises OldestPending
	// stopping is closed when the first Stop begins: from then on an
	// executor serves no OldestPending request until it exits.
	stopping chan struct{}

	orphanShare atomic.Int64 // SetOrphanShare's, read by the executors at ticks
}

// SetOrphanShare sets every shard's ackcore.Config.OrphanShare: the most
// orphans (entries made by an ACK, FAIL or RESET for a root with no
// entry) one producer's messages may have in a shard; its messages past
// it that would make one are refused, counted in Stats.OrphansRefused and
// OrphansRefused(producer). n <= 0 means no bound but the table's. The
// shards take it at their next tick. Safe from any goroutine.
func (a *Acker) SetOrphanShare(n int) { a.orphanShare.Store(int64(max(n, 0))) }

// OrphansRefused is how many of producer p's ACKs, FAILs and RESETs the
// shards refused at its orphan share (SetOrphanShare): while running, as
// of each shard's last tick; after Stop, exact.
func (a *Acker) OrphansRefused(p int) uint64 {
	if p < 0 || p >= len(a.producers) {
		panic(fmt.Sprintf("acker: OrphansRefused(%d) out of range [0, %d)", p, len(a.producers)))
	}
	n := uint64(0)
	for _, e := range a.execs {
		n += e.refused[p].Load()
	}
	return n
}

// New checks cfg (every size and count, then the Footprint against
// MaxBytes) and only then builds the acker, allocating every shard's table
// and every ring; Start runs it.
func New(cfg Config) (*Acker, error) {
	// The task table first, so that ReceiverOf is called once per task
	// (a caller may hand out receivers as it is asked): validate checks
	// the table's answers, not new ones.
	spec, recvOf, err := cfg.Spec.InboxTable()
	if err != nil {
		return nil, err
	}
	cfg.Spec = spec
	cfg.ReceiverOf = func(t int) int { return int(recvOf[t]) }
	cfg, err = cfg.validate()
	if err != nil {
		return nil, err
	}
	foot := cfg.footprint()
	if cfg.Shard.Clock == nil {
		cfg.Shard.Clock = ackcore.NewMonotonicClock()
	}
	// Executors spin long when they have processors to spare; producers
	// waiting for ring space and receivers waiting for outcomes (a
	// goroutine per spout task, often many more than the processors)
	// take ring's short spin.
	idle, execIdle := ring.DefaultIdle(), DefaultIdle(cfg.Shards)
	if cfg.Idle != nil {
		idle, execIdle = *cfg.Idle, *cfg.Idle
	}
	a := &Acker{cfg: cfg, foot: foot, recvOf: recvOf, epoch: time.Now(), log: cfg.Logger, stopping: make(chan struct{})}
	if a.log == nil {
		a.log = slog.Default()
	}
	a.orphanShare.Store(int64(cfg.Shard.OrphanShare))
	a.recvs = make([]*Receiver, cfg.Receivers)
	for r := range a.recvs {
		a.recvs[r] = &Receiver{a: a, id: uint32(r),
			in: ring.NewFanIn[ackcore.Outcome](cfg.Shards, cfg.OutcomeRingSize, cfg.OutcomeRingSize, idle)}
	}
	for i := range cfg.Shards {
		e := newExecutor(i, &cfg, recvOf, execIdle)
		e.share = &a.orphanShare
		scfg := cfg.Shard
		scfg.Clock = &e.coarse
		scfg.Seed = shardSeed(scfg.Seed, i)
		e.coarse.now = e.clock.Now()
		sh, err := ackcore.NewShard(scfg)
		if err != nil {
			return nil, err
		}
		e.shard = sh
		for r := range e.outs {
			e.outs[r] = a.recvs[r].in.Producer(i)
			e.holders[r] = &a.recvs[r].holders
		}
		a.execs = append(a.execs, e)
	}
	route := newRouter(cfg.Seed, cfg.Shards)
	a.producers = make([]*Producer, cfg.Producers)
	for p := range a.producers {
		pr := &Producer{tasks: uint32(cfg.Tasks), route: route, batch: cfg.Batch, recvOf: recvOf, idle: idle, id: p,
			running: &a.running, spans: make([][]ackcore.Msg, cfg.Shards), fill: make([]int, cfg.Shards),
			done: make([]uint64, cfg.Shards), open: make([]atomic.Uint64, cfg.Shards)}
		for _, e := range a.execs {
			pr.rings = append(pr.rings, e.in.Producer(p))
			pr.gates = append(pr.gates, e.gate)
		}
		a.producers[p] = pr
	}
	a.plan = a.makePlan()
	a.baseNote = a.plan.Note
	a.plan.Note = joinNote(a.baseNote, a.oversubscribed())
	return a, nil
}

// makePlan assigns the executors' CPUs (with Pin): from Config.Planner
// when set, else from a plan of this machine for the shards alone. A plan
// that would put two threads on one CPU pins nothing: a pinned goroutine
// keeps its OS thread, which hands its processor over each time it waits,
// and four shards pinned two to a CPU (2 CPUs) ran ackbench's pipeline
// level at 0.66x and 0.69x the messages a second of the same unpinned
// (BENCHMARKS.md).
func (a *Acker) makePlan() affinity.Assignment {
	var plan affinity.Assignment
	if a.cfg.Pin {
		if a.cfg.Planner != nil {
			plan = a.cfg.Planner.Take(len(a.execs))
		} else if topo, err := affinity.Detect(); err != nil {
			plan.Note = "unpinned: " + err.Error()
		} else {
			plan = affinity.Plan(len(a.execs), topo)
		}
		if plan.Shared {
			plan = affinity.Assignment{Note: "unpinned: " + plan.Note +
				"; pinned threads that share a CPU run slower than unpinned ones"}
		}
	}
	return plan
}

// oversubscribed says, pinned or not, when executors and producers alone
// outnumber GOMAXPROCS now; "" when they do not.
func (a *Acker) oversubscribed() string {
	procs := runtime.GOMAXPROCS(0)
	if len(a.execs)+len(a.producers) <= procs {
		return ""
	}
	return fmt.Sprintf("oversubscribed: %d executors and %d producers exceed GOMAXPROCS %d: while they all spin, "+
		"a goroutine woken onto a busy executor's processor waits for it to yield (milliseconds; see the package doc, Concurrency)",
		len(a.execs), len(a.producers), procs)
}

// joinNote joins the parts of a Plan note that are not empty.
func joinNote(parts ...string) string {
	var out string
	for _, p := range parts {
		if p != "" {
			if out != "" {
				out += "; "
			}
			out += p
		}
	}
	return out
}

// Sender returns producer handle i, in [0, Spec.Producers), as the
// Port's Sender; it is always a *Producer. Each handle belongs to one
// goroutine. An index out of range is a programmer error: it panics with
// a message naming the index and the range.
func (a *Acker) Sender(i int) Sender {
	if i < 0 || i >= len(a.producers) {
		panic(fmt.Sprintf("acker: Sender(%d) out of range [0, %d)", i, len(a.producers)))
	}
	return a.producers[i]
}

// Inbox returns outcome receiver r, in [0, Spec.Receivers), as the Port's
// Inbox; it is always a *Receiver, which has, beyond the Inbox, Run and
// Stats: a.Inbox(r).(*acker.Receiver). Spout task t's receiver, which it
// shares with the other tasks mapped to it (Config.Receivers), is
// Inbox(ReceiverOf(t)); one goroutine takes from a receiver. Out of
// range, it panics naming r and the range.
func (a *Acker) Inbox(r int) Inbox {
	if r < 0 || r >= len(a.recvs) {
		panic(fmt.Sprintf("acker: Inbox(%d) out of range [0, %d)", r, len(a.recvs)))
	}
	return a.recvs[r]
}

// ReceiverOf is the receiver task t's outcomes go to; t out of [0, Tasks)
// panics, naming it and the range.
func (a *Acker) ReceiverOf(t int) int {
	if t < 0 || t >= len(a.recvOf) {
		panic(fmt.Sprintf("acker: task %d out of range [0, %d)", t, len(a.recvOf)))
	}
	return int(a.recvOf[t])
}

// Footprint is the most this acker may hold, as New checked it against
// Config.MaxBytes.
func (a *Acker) Footprint() Footprint { return a.foot }

// Plan is the executors' CPU assignment, from New on. Its Note also says,
// pinned or not, when executors and producers alone outnumber GOMAXPROCS
// (it starts with "oversubscribed:"); goroutines waiting on receivers come
// on top. After Start it also names executors that failed to pin. Safe
// from any goroutine, at any time.
func (a *Acker) Plan() affinity.Assignment {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.plan
	p.CPUs = slices.Clone(p.CPUs)
	return p
}

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
	if a.started || a.stopped {
		return errors.New("acker: Start called twice, or after Stop")
	}
	a.started = true
	a.running.Store(true)
	a.plan.Note = joinNote(a.baseNote, a.oversubscribed()) // GOMAXPROCS may have changed since New
	full := len(a.execs)+len(a.producers) >= runtime.GOMAXPROCS(0)
	for i, e := range a.execs {
		cpu := -1
		if a.cfg.Pin && i < len(a.plan.CPUs) {
			cpu = a.plan.CPUs[i]
		}
		e.yieldOnWake = full
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			e.run(cpu, func(err error) {
				a.mu.Lock()
				a.plan.Note = joinNote(a.plan.Note, fmt.Sprintf("executor %d unpinned: %v", i, err))
				a.mu.Unlock()
			})
		}()
	}
	return nil
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

// OldestPending returns up to n pending roots across all shards, oldest
// first. Each running shard answers at its next tick, from its executor:
// the scan costs O(table slots) of that executor's time (a diagnostic,
// not a hot path). Safe from any goroutine, before Start, while Stop
// runs and after it. While Stop runs a stopping shard serves no request
// (it may be waiting for the very receiver whose poller asks): a shard
// whose executor has exited answers, one still stopping reports nothing.
func (a *Acker) OldestPending(n int) []ackcore.PendingRoot {
	if n <= 0 {
		return nil
	}
	a.oldMu.Lock()
	defer a.oldMu.Unlock()
	var all []ackcore.PendingRoot
	for _, e := range a.execs {
		all = append(all, a.oldestOf(e, n)...)
	}
	slices.SortStableFunc(all, func(x, y ackcore.PendingRoot) int {
		switch {
		case x.Age > y.Age:
			return -1
		case x.Age < y.Age:
			return 1
		}
		return 0
	})
	return all[:min(n, len(all))]
}

// oldestOf asks e's shard for its n oldest roots: through its executor
// while it runs, directly when it has not started or has exited (oldMu
// keeps two callers off one shard).
func (a *Acker) oldestOf(e *executor, n int) []ackcore.PendingRoot {
	a.mu.Lock()
	if !a.started {
		defer a.mu.Unlock() // Start waits: the shard is ours
		return e.shard.OldestPending(n, nil)
	}
	a.mu.Unlock()
	req := oldestReq{n: n, reply: make(chan []ackcore.PendingRoot, 1)}
	select {
	case e.reqs <- req:
		return <-req.reply
	case <-e.done:
		return e.shard.OldestPending(n, nil)
	case <-a.stopping:
		// The executor may be in its last phase, serving no request and
		// waiting for receivers, one of them perhaps polled by this
		// caller: waiting here could hold both until Stop's deadline.
		select {
		case <-e.done:
			return e.shard.OldestPending(n, nil)
		default:
			return nil
		}
	}
}
