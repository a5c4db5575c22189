package topology

import (
	"fmt"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/ring"
)

// boltExec runs the tasks of one bolt executor: it drains its input rings
// a batch per ring per pass, calls Execute for each tuple, and after each
// pass publishes what the tasks emitted and flushes its acker messages.
type boltExec struct {
	executor
	bolts  []Bolt // by local task
	first  int    // the first task's global id (tasks are consecutive)
	in     *ring.FanIn[*Tuple]
	coll   BoltCollector
	handle func(int, []*Tuple)
	passes int
	// The ACK being folded: consecutive acks for one root are XORed into
	// one message (ACK(r, a) then ACK(r, b) is ACK(r, a^b)), sent when an
	// ack for another root comes or at the end of the pass.
	held    bool
	heldMsg ackcore.Msg
	// Config.ProgressTimeout on a Config.Port acker: an ack of a root
	// older than progressAfter (ns since its emit; 0: off) sends a RESET
	// for it, once per pass per root in a row (progressRoot).
	progressAfter int64
	progressRoot  uint64
}

func newBoltExec(base executor, bolts []Bolt, in *ring.FanIn[*Tuple]) *boltExec {
	b := &boltExec{executor: base, bolts: bolts, in: in}
	b.first = b.tasks[0]
	b.coll.b = b
	b.handle = b.execute
	b.execHist, b.pubExecHist = newExecHist(), newExecHist()
	if cfg := &b.top.cfg; cfg.ProgressTimeout && cfg.Port != nil {
		// An acker of another kind (the network acker) may not follow
		// progress itself: RESETs tell it. The in-process one does
		// (ackcore.Config.ProgressTimeout).
		b.progressAfter = int64(cfg.MessageTimeout / progressFraction)
	}
	return b
}

// progressFraction: with Config.ProgressTimeout, acks of a root older than
// MessageTimeout/progressFraction restart its timeout. A quarter: a tree
// whose acks come less than 3/4 of the timeout apart never times out,
// one that stops times out between 3/4 and 1 timeout after its last
// progress, and trees younger than a quarter of the timeout (all of them
// in a healthy topology) cost no RESET.
const progressFraction = 4

func (b *boltExec) run() {
	defer b.top.execDone(&b.executor)
	b.clock()
	for {
		if b.progressAfter > 0 {
			b.clock() // the age of each acked root is read against it
			b.progressRoot = 0
		}
		if b.in.Drain(b.handle) == 0 {
			b.flush()
			b.clock()
			b.publish()
			if b.in.DrainWait(b.handle) == 0 {
				break // closed and empty
			}
		}
		b.flush()
		if b.passes++; b.passes&63 == 0 {
			b.clock()
			b.maybePublish()
		}
	}
	b.flush()
	b.clock()
	closeTasks(&b.executor, b.bolts)
	b.publish()
}

// execute executes a drained batch. Its time, read twice a batch, is the
// executor's busy time (Busy, the capacity): measured whole, so an
// executor is never busier than the wall clock. (Scaling the sampled
// Execute times up by ExecSampleEvery did that: a sample that included a
// preemption counted it 64 times, and one executor showed 206%.)
func (b *boltExec) execute(_ int, items []*Tuple) {
	clock := b.top.cfg.Clock
	t0 := clock.Now()
	for i := 0; i < len(items); {
		i = b.executeFrom(items, i)
	}
	b.m.BusyNs += uint64(max(clock.Now()-t0, 0))
}

// executeFrom executes items[i:] under one recover (a defer per batch, not
// per tuple). It returns len(items), or, when an Execute panicked, the
// index after that tuple's, which it has failed with ackcore.ReasonPanic.
func (b *boltExec) executeFrom(items []*Tuple, i int) (next int) {
	defer func() {
		if v := recover(); v != nil {
			t := items[next]
			pe := b.recovered(int(t.dstTask), "Execute", v)
			if t.state == tupleLive {
				_ = b.fail(t, pe)
			}
			next++
		}
	}()
	drop := b.top.dropHook
	for next = i; next < len(items); next++ {
		t := items[next]
		if drop != nil && drop(t) {
			b.m.Dropped++
			if t.trace != nil {
				t.trace.set(traceLost, b.traceNow())
			}
			continue
		}
		if t.trace != nil {
			t.trace.set(traceDelivered, b.traceNow())
		}
		b.m.Executed++
		b.coll.task = int(t.dstTask)
		if b.m.Executed&(ExecSampleEvery-1) != 0 {
			b.bolts[int(t.dstTask)-b.first].Execute(t, &b.coll)
		} else {
			b.timedExecute(b.bolts[int(t.dstTask)-b.first], t)
		}
	}
	return next
}

// ExecSampleEvery: a bolt executor times one Execute in ExecSampleEvery
// (two clock reads and a histogram record, about 40 ns, so under a
// nanosecond per Execute), for ComponentMetrics.ExecuteLatency. (Busy
// is the batches' time, two clock reads a batch.)
// A power of two: the test is a mask.
const ExecSampleEvery = 64

// timedExecute is Execute, timed on the engine clock. A panic skips the
// record (executeFrom recovers it).
func (b *boltExec) timedExecute(bolt Bolt, t *Tuple) {
	clock := b.top.cfg.Clock
	t0 := clock.Now()
	bolt.Execute(t, &b.coll)
	d := clock.Now() - t0
	_ = b.execHist.RecordValue(min(max(int64(d), execHistMin), execHistMax)) // in range by construction
}

// flush publishes the staged tuples (waiting for room: downstream always
// drains, the topology has no cycles) and the acker messages.
func (b *boltExec) flush() {
	b.flushOuts(true)
	if b.held {
		b.held = false
		b.send(b.heldMsg)
	}
	if b.sender != nil {
		if err := b.sender.Flush(); err != nil {
			b.m.AckerErrors++
		}
	}
}

// traceNow reads the engine clock for a traced tuple's event (b.now may
// be up to 64 passes old).
func (b *boltExec) traceNow() int64 { return int64(b.top.cfg.Clock.Now()) }

func (b *boltExec) send(m ackcore.Msg) {
	if err := b.sender.Send(m); err != nil {
		b.m.AckerErrors++
	}
}

// delivered reports whether t was delivered to one of this executor's
// tasks (only then may it read or write t's state).
func (b *boltExec) delivered(t *Tuple) bool {
	return t.dstTask >= int32(b.first) && int(t.dstTask) < b.first+len(b.bolts)
}

// checkAnchor reports why a cannot be an anchor here, if it cannot.
func (b *boltExec) checkAnchor(a *Tuple) error {
	if !b.delivered(a) {
		return fmt.Errorf("topology: bolt %q: anchor %s was not delivered to this executor", b.comp.name, a.describe())
	}
	if a.state != tupleLive {
		return fmt.Errorf("topology: bolt %q: anchor %s was already acked or failed", b.comp.name, a.describe())
	}
	return nil
}

// emit is the bolt collector's emit: one tuple per target task, anchored
// to one (one) or several (many) inputs, or to none.
func (b *boltExec) emit(st *stream, direct int, one *Tuple, many []*Tuple, values []any) error {
	if one != nil {
		if err := b.checkAnchor(one); err != nil {
			return err
		}
	}
	for _, a := range many {
		if err := b.checkAnchor(a); err != nil {
			return err
		}
	}
	targets, err := b.route(st, values, direct)
	if err != nil {
		return err
	}
	traced := one != nil && one.trace != nil
	for _, a := range many {
		traced = traced || a.trace != nil
	}
	src := b.coll.task
	for _, dst := range targets {
		t := b.newTuple(st, values, src, dst)
		if traced {
			t.trace = childTrace(one, many, dst, b.traceNow())
		}
		if one != nil && one.anchors.n > 0 {
			e := b.gen.next()
			one.ackVal ^= e
			if one.anchors.n == 1 {
				t.anchors.one, t.anchors.n = one.anchors.one, 1
				t.anchors.one.edge = e
			} else {
				for i := 0; i < one.anchors.len(); i++ {
					t.anchors.putXor(one.anchors.at(i), e)
				}
			}
			t.attempt = one.attempt
		}
		for _, a := range many {
			if a.anchors.n == 0 {
				continue
			}
			e := b.gen.next()
			a.ackVal ^= e
			for i := 0; i < a.anchors.len(); i++ {
				t.anchors.putXor(a.anchors.at(i), e)
			}
			t.attempt = max(t.attempt, a.attempt)
		}
		b.push(t, true)
	}
	b.m.Emitted++
	return nil
}

func (b *boltExec) ack(t *Tuple) error {
	if err := b.end(t, "Ack", tupleAcked); err != nil {
		return err
	}
	b.m.Acked++
	for i := 0; i < t.anchors.len(); i++ {
		a := t.anchors.at(i)
		if !b.top.spoutOf[a.spout].isLive(a.root) {
			// Late: the root failed, timed out or stopped. An ACK now
			// would only leave an orphan entry at the acker.
			b.m.LateAcks++
			continue
		}
		if b.progressAfter > 0 && b.now-a.born >= b.progressAfter && a.root != b.progressRoot {
			// Config.ProgressTimeout: the tree progressed; restart its
			// timeout (sent before the ACK, which is held: a RESET never
			// reaches the acker after the tree's completion).
			b.progressRoot = a.root
			b.resetRoot(a, b.now)
		}
		v := a.edge ^ t.ackVal
		if b.held && b.heldMsg.Root == a.root {
			b.heldMsg.Val ^= v
			continue
		}
		if b.held {
			b.send(b.heldMsg)
		}
		b.held, b.heldMsg = true, ackcore.Msg{Root: a.root, Val: v, Kind: ackcore.Ack}
	}
	return nil
}

// end moves t from live to its end state (acked or failed) for call (Ack
// or Fail), closing its trace, or says why it may not: t is not this
// executor's, or has ended already (then nothing may be sent for it).
func (b *boltExec) end(t *Tuple, call string, state tupleState) error {
	if err := b.owns(t); err != nil {
		return err
	}
	if t.state != tupleLive {
		return b.ended(t, call)
	}
	t.state = state
	if t.trace != nil {
		t.trace.set(traceDone, 0)
	}
	return nil
}

// owns reports, as an error, a tuple this executor may not ack or fail:
// one delivered to another executor (its state belongs to that one).
func (b *boltExec) owns(t *Tuple) error {
	if t == nil {
		return fmt.Errorf("topology: bolt %q: Ack or Fail of a nil tuple", b.comp.name)
	}
	if !b.delivered(t) {
		return fmt.Errorf("topology: bolt %q: Ack or Fail of %s, which was not delivered to this executor", b.comp.name, t.describe())
	}
	return nil
}

// ended is the error of an Ack or Fail (call) of a tuple already acked or
// failed: the tuple's state says so, and nothing is sent (a second ACK
// of one tuple would XOR its edge back into the root's val, which then
// never reaches 0; a second FAIL would only leave an orphan).
func (b *boltExec) ended(t *Tuple, call string) error {
	was := "acked"
	if t.state == tupleFailed {
		was = "failed"
	}
	return fmt.Errorf("topology: bolt %q: %s of %s, which was already %s", b.comp.name, call, t.describe(), was)
}

// fail fails t's roots. The first bolt to fail a live root takes it out
// of its spout's live table (the only write there not by the spout, a
// compare-and-swap from the root to 0), so that from then on no bolt
// sends an ACK, RESET or second FAIL for it; it puts err in the spout's
// errBox, then sends the one FAIL.
func (b *boltExec) fail(t *Tuple, err error) error {
	if e := b.end(t, "Fail", tupleFailed); e != nil {
		return e
	}
	b.m.Failed++
	for i := 0; i < t.anchors.len(); i++ {
		a := t.anchors.at(i)
		sp := b.top.spoutOf[a.spout]
		if !sp.kill(a.root) {
			continue // already failed, timed out or stopped
		}
		if err != nil {
			sp.errs.put(a.root, err) // before the FAIL, so it is there with the outcome
		}
		b.send(ackcore.Msg{Root: a.root, Kind: ackcore.Fail})
	}
	return nil
}

// reset restarts the timeouts of t's roots, each at most up to its emit
// time plus Config.ResetCap.
func (b *boltExec) reset(t *Tuple) {
	if t == nil || !b.delivered(t) || t.state != tupleLive || t.anchors.n == 0 {
		return
	}
	now := b.clock()
	for i := 0; i < t.anchors.len(); i++ {
		a := t.anchors.at(i)
		if !b.resetRoot(a, now) {
			b.m.ResetsCapped++
		}
	}
}

// resetRoot sends a RESET for a's root, restarting its timeout at most up
// to its emit time plus Config.ResetCap; it reports false when the cap
// is reached (no RESET). A root that is not live gets none: it would
// leave an orphan entry.
func (b *boltExec) resetRoot(a *anchor, now int64) bool {
	cfg := &b.top.cfg
	left := time.Duration(a.born + int64(cfg.ResetCap) - now)
	if left < time.Millisecond {
		return false
	}
	if !b.top.spoutOf[a.spout].isLive(a.root) {
		return true
	}
	m := ackcore.Msg{Root: a.root, Kind: ackcore.Reset}
	if left < cfg.MessageTimeout || cfg.Port != nil {
		m.TimeoutMs = uint32(min(left, cfg.MessageTimeout) / time.Millisecond)
	}
	b.m.Resets++
	b.send(m)
	return true
}
