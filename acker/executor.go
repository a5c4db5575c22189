package acker

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/affinity"
	"github.com/xorack/xorack/ring"
)

// routeChunk is the most outcomes an executor routes at once: what it
// gathers over a pass of its rings before handing them to the receivers'
// rings (one publish per receiver per route, not per applied span), and the
// size of its route scratch (32 KiB).
const routeChunk = 1024

// noRecv marks an outcome that goes to no receiver (a Refused ACK, FAIL or
// RESET: no task).
const noRecv = ^uint32(0)

// coarseClock is the executor's loop-sampled clock: the shard reads it per
// Apply, the loop sets it once per pass. Both run on the executor's
// goroutine, so it needs no synchronisation.
type coarseClock struct{ now time.Duration }

func (c *coarseClock) Now() time.Duration { return c.now }

// executor runs one shard. Everything but the fields marked otherwise is
// owned by its goroutine (or, before Start and after it exits, by whoever
// holds Acker.mu).
type executor struct {
	id     int
	shard  *ackcore.Shard
	clock  ackcore.Clock // the real clock, sampled once per pass
	coarse coarseClock   // what the shard reads
	in     *ring.FanIn[ackcore.Msg]
	outs   []*ring.SPSC[ackcore.Outcome] // outs[r]: into receiver r's fan-in
	recvOf []uint32                      // task -> receiver (Acker.recvOf)
	out    []ackcore.Outcome             // outcomes applied, not yet routed
	// expiring: the last Expire stopped with more roots due; the loop
	// takes the next slice on its next pass.
	expiring bool

	// Route scratch: the receiver of each outcome of a chunk, the count
	// (then the end offset) of each receiver's group, the receivers in the
	// chunk, and the chunk grouped by receiver.
	rcv    []uint32
	cnt    []int32
	dirty  []uint32
	sorted []ackcore.Outcome

	// Held outcomes: q[r] for receiver r, waiting lists the receivers
	// whose q is not empty.
	q       []heldQueue
	waiting []uint32
	pool    chunkPool
	backlog int // Config.Backlog

	// yieldOnWake: executors and producers fill every processor
	// (set by Start), so a receiver this executor wakes has none to run
	// on but this one.
	yieldOnWake bool

	gate *gate // hold-back flags read by the producers
	// heldN[r] is len(q[r]), published for ReceiverStats; written by the
	// executor only when it changes while not 0 or drops to 0.
	heldN []atomic.Int64
	// holders[r] is the receiver's count of shards holding outcomes for
	// it (Receiver.holders, shared by every executor).
	holders []*atomic.Int32

	// share is Acker.SetOrphanShare's value, read at ticks (the shard's
	// is share, applied); refused[p] is producer p's orphan refusals in
	// this shard, published at ticks when the shard's total moved from
	// lastRefused.
	share       *atomic.Int64
	shard0      int64
	refused     []atomic.Uint64
	lastRefused uint64

	// applied[p] is the messages of producer p drained from its ring;
	// dropped[r] is the outcomes for receiver r dropped because its ring
	// was closed (Stop past its deadline). Written by the executor, read
	// after it exits (Stop, after Acker.wg.Wait) or, dropped, atomically
	// by ReceiverStats.
	applied []uint64
	dropped []atomic.Int64

	reqs chan oldestReq // OldestPending requests, served at ticks
	done chan struct{}  // closed when run returns

	mu   sync.Mutex // guards snap, cpu
	snap ackcore.Stats
	cpu  int
}

// oldestReq asks an executor for its shard's n oldest pending roots.
type oldestReq struct {
	n     int
	reply chan []ackcore.PendingRoot
}

func newExecutor(i int, cfg *Config, recvOf []uint32, idle ring.Idle) *executor {
	r := cfg.Receivers
	return &executor{
		id:      i,
		clock:   cfg.Shard.Clock,
		in:      ring.NewFanIn[ackcore.Msg](cfg.Producers, cfg.RingSize, cfg.Batch, idle),
		outs:    make([]*ring.SPSC[ackcore.Outcome], r),
		recvOf:  recvOf,
		out:     make([]ackcore.Outcome, 0, routeChunk+cfg.Batch),
		rcv:     make([]uint32, routeChunk),
		cnt:     make([]int32, r),
		sorted:  make([]ackcore.Outcome, routeChunk),
		q:       make([]heldQueue, r),
		backlog: cfg.Backlog,
		gate:    newGate(r),
		heldN:   make([]atomic.Int64, r),
		applied: make([]uint64, cfg.Producers),
		dropped: make([]atomic.Int64, r),
		holders: make([]*atomic.Int32, r),
		reqs:    make(chan oldestReq),
		refused: make([]atomic.Uint64, cfg.Producers),
		shard0:  int64(cfg.Shard.OrphanShare),
		done:    make(chan struct{}),
		cpu:     -1,
	}
}

func (e *executor) run(cpu int, pinErr func(error)) {
	defer close(e.done)
	if cpu >= 0 {
		if unpin, err := affinity.Pin(cpu); err == nil {
			defer unpin()
		} else {
			pinErr(err)
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
	// The shard reads the clock once per pass, when the pass applies its
	// first messages: after a wait, not before it, so that messages are
	// stamped with the time they arrived, not the time the executor
	// started waiting.
	stale := true
	apply := func(p int, items []ackcore.Msg) {
		if stale {
			e.coarse.now, stale = e.clock.Now(), false
		}
		e.applied[p] += uint64(len(items))
		e.shard.SetOwner(p) // orphans count against their producer (ackcore.Shard.SetOwner)
		e.out = e.shard.Apply(items, e.out)
		if len(e.out) >= routeChunk {
			e.route()
		}
	}
	e.coarse.now = e.clock.Now()
	nextTick := e.coarse.now + tick
	for {
		stale = true
		var got int
		var fired bool
		if e.expiring {
			// A wave of timeouts is being reported a slice per pass:
			// take what the rings have without waiting, then the next
			// slice, so that Apply and Expire interleave.
			got = e.in.Drain(apply)
		} else {
			got, fired = e.in.DrainWaitUntil(apply, timer.C)
		}
		e.route()
		if len(e.waiting) > 0 {
			e.flushHeld()
		}
		if stale {
			e.coarse.now = e.clock.Now()
		}
		if fired || e.coarse.now >= nextTick {
			// A tick: expire, publish counters, answer OldestPending, and
			// re-arm the timer (Reset also re-arms one that fired unseen).
			// The shard's clock may be a test's fake, so the real timer's
			// firing counts as a tick whatever the clock says.
			e.expire()
			e.publish()
			select {
			case req := <-e.reqs:
				req.reply <- e.shard.OldestPending(req.n, nil)
			default:
			}
			nextTick = e.coarse.now + tick
			timer.Reset(tick)
		} else if e.expiring {
			e.expire()
		}
		if got == 0 && !fired && e.in.Closed() {
			// Closed is set after every ring is sealed, so the rings
			// hold all they ever will: drain them to empty (a publish may
			// have landed after the pass above and before the seal).
			if e.in.Drain(apply) > 0 {
				continue
			}
			break
		}
	}
	// Stopping: everything sent has been applied. Deliver what is held,
	// then fail what is pending, waiting for the receivers to take it all.
	e.flushHeldWait()
	out := e.shard.StopAll(e.out[:0])
	for len(out) > 0 {
		n := min(len(out), routeChunk)
		e.routeChunk(out[:n])
		e.flushHeldWait()
		out = out[n:]
	}
	e.out = nil
	e.publish()
}

// nudge ends the executor's wait for messages, so that it moves held
// outcomes into rings that have room now (from any goroutine).
func (e *executor) nudge() { e.in.Interrupt() }

// expire reports one slice of the roots past their deadline (at most
// ackcore's per-call limits, and the room e.out has); when more are due,
// expiring is set and the loop takes the next slice on its next pass,
// after applying what the rings hold, instead of waiting for the next
// tick: a wave of a million timeouts never holds back the producers for
// more than one slice at a time.
func (e *executor) expire() {
	e.out, e.expiring = e.shard.Expire(e.out[:0])
	e.route()
}

// route hands e.out's outcomes to their receivers and empties it.
func (e *executor) route() {
	for out := e.out; len(out) > 0; {
		n := min(len(out), routeChunk)
		e.routeChunk(out[:n])
		out = out[n:]
	}
	e.out = e.out[:0]
}

// routeChunk hands out (at most routeChunk outcomes) to their receivers'
// rings, with one PushBatch per receiver: one compare-and-swap per ring and
// route, not per outcome. It groups them by receiver with a counting sort
// into e.sorted (one receiver needs no grouping). Outcomes with no task
// (Refused ACK, FAIL, RESET) are counted in ackcore.Stats and not routed.
func (e *executor) routeChunk(out []ackcore.Outcome) {
	dirty, skipped := e.dirty[:0], 0
	for i := range out {
		t := out[i].Task
		if t >= uint32(len(e.recvOf)) {
			e.rcv[i] = noRecv
			skipped++
			continue
		}
		r := e.recvOf[t]
		e.rcv[i] = r
		if e.cnt[r] == 0 {
			dirty = append(dirty, r)
		}
		e.cnt[r]++
	}
	woke := false
	if len(dirty) == 1 && skipped == 0 {
		r := dirty[0]
		e.cnt[r] = 0
		woke = e.deliver(r, out)
	} else {
		pos := int32(0)
		for _, r := range dirty { // counts -> start offsets
			c := e.cnt[r]
			e.cnt[r] = pos
			pos += c
		}
		for i := range out {
			if r := e.rcv[i]; r != noRecv {
				e.sorted[e.cnt[r]] = out[i]
				e.cnt[r]++ // ends as the group's end offset
			}
		}
		start := int32(0)
		for _, r := range dirty {
			end := e.cnt[r]
			e.cnt[r] = 0
			woke = e.deliver(r, e.sorted[start:end]) || woke
			start = end
		}
	}
	e.dirty = dirty[:0]
	if woke && e.yieldOnWake {
		// A woken receiver goroutine is queued on this executor's
		// processor, behind this loop, which does not block while there
		// is work, and no processor is idle to take it: let it run now
		// instead of at the next preemption. (With idle processors the
		// runtime starts one for it, and a yield would only cost a
		// pinned executor a hand-off of its processor to another thread
		// and back.)
		runtime.Gosched()
	}
}

// deliver hands os to receiver r: into its ring while nothing is held for
// it and the ring has room, the rest to its held queue, which holds back
// r's INITs once it reaches Backlog. It reports whether r's goroutine was
// parked (and is now woken).
func (e *executor) deliver(r uint32, os []ackcore.Outcome) (woke bool) {
	q := &e.q[r]
	if q.n == 0 {
		ring := e.outs[r]
		woke = ring.ConsumerParked()
		k := ring.PushBatch(os)
		if os = os[k:]; len(os) == 0 {
			return woke
		}
		e.waiting = append(e.waiting, r)
		e.holders[r].Add(1)
	}
	q.push(os, &e.pool)
	e.heldN[r].Store(int64(q.n))
	if q.n >= e.backlog && e.gate.held[r].Load() == 0 {
		e.gate.hold(r)
	}
	return woke
}

// flushHeld moves held outcomes into their receivers' rings, as much as
// each ring takes, and releases the receivers whose held queue fell to
// Backlog/2 or below.
func (e *executor) flushHeld() {
	keep := e.waiting[:0]
	for _, r := range e.waiting {
		q, ring := &e.q[r], e.outs[r]
		for q.n > 0 {
			f := q.front()
			k := ring.PushBatch(f)
			q.pop(k, &e.pool)
			if k < len(f) {
				break
			}
		}
		e.heldN[r].Store(int64(q.n))
		if q.n <= e.backlog/2 && e.gate.held[r].Load() != 0 {
			e.gate.release(r)
		}
		if q.n > 0 {
			keep = append(keep, r)
		} else {
			e.holders[r].Add(-1)
		}
	}
	e.waiting = keep
}

// flushHeldWait moves every held outcome into its receiver's ring, waiting
// for each receiver to make room (Stop). A receiver whose ring is closed
// (Stop's deadline passed) takes nothing more: its outcomes are dropped,
// counted in dropped.
func (e *executor) flushHeldWait() {
	for _, r := range e.waiting {
		q, ring := &e.q[r], e.outs[r]
		for q.n > 0 {
			f := q.front()
			k := ring.PushBatch(f)
			if k == 0 {
				if !ring.Push(f[0]) {
					e.dropped[r].Add(int64(q.n))
					for q.n > 0 { // closed: nobody will read
						q.pop(len(q.front()), &e.pool)
					}
					break
				}
				k = 1
			}
			q.pop(k, &e.pool)
		}
		e.heldN[r].Store(0)
		e.holders[r].Add(-1)
		if e.gate.held[r].Load() != 0 {
			e.gate.release(r)
		}
	}
	e.waiting = e.waiting[:0]
}

func (e *executor) publish() {
	if v := e.share.Load(); v != e.shard0 {
		e.shard0 = v
		e.shard.SetOrphanShare(int(v))
	}
	st := e.shard.Stats()
	if st.OrphansRefused != e.lastRefused {
		e.lastRefused = st.OrphansRefused
		for p := range e.refused {
			e.refused[p].Store(e.shard.OwnerStats(p).Refused)
		}
	}
	e.mu.Lock()
	e.snap = st
	e.mu.Unlock()
}
