package acker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// DefaultStopTimeout is Config.StopTimeout's default: how long Stop waits
// for the receivers to take the outcomes of the roots it reports before
// it drops the rest and says so. Long enough for receivers that poll
// (they take a ring's worth in microseconds), short enough that a
// receiver nobody polls costs a shutdown seconds, not forever.
const DefaultStopTimeout = 10 * time.Second

// stopLogEvery is how often StopContext, while it waits, logs the
// receivers holding outcomes; stopLogged is the most it names in a line
// (the largest backlogs), so that an acker of thousands of receivers logs
// one readable line.
const (
	stopLogEvery = time.Second
	stopLogged   = 8
)

// Stop is StopContext with a deadline Config.StopTimeout from now
// (DefaultStopTimeout unless set), for the Port interface: it returns the
// final counters and logs StopContext's error, if any, to Config.Logger.
func (a *Acker) Stop() ackcore.Stats {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.StopTimeout)
	defer cancel()
	st, err := a.StopContext(ctx)
	if err != nil {
		a.log.Error(err.Error())
	}
	return st
}

// StopContext stops the acker gracefully and returns the final exact
// counters. Call it after the producers' last Flush: a Flush racing with
// it may find the rings closed (and say so). Producers' further sends fail
// with ErrClosed (a Send waiting for a held-back receiver returns it too),
// every message already published is applied, every root still pending
// with an INIT is reported Failed{stopped} to its receiver (so it can be
// replayed), and the executors exit.
//
// It waits for the receivers to take those outcomes, so something must
// keep taking from them while it runs: call it from a goroutine other than
// the ones that poll, and have those poll until Wait returns false. While
// it waits it logs, every second, the receivers holding outcomes and how
// many. When ctx is done first, it stops waiting: what the receivers'
// rings could not take is dropped, and the error (a *StopError, which
// wraps ctx's error) names each such receiver and how many it lost, so
// StopContext returns soon after ctx's deadline whatever the receivers
// do. The error also names the producers that left messages staged and
// unpublished (a missing Flush), each with how many it counted: those
// were not applied, and Acker.NotApplied counts them, with any a send
// racing this call staged after the count. Without either, the error is
// nil.
//
// A second call waits for the first (or ctx) and returns its error.
func (a *Acker) StopContext(ctx context.Context) (ackcore.Stats, error) {
	a.mu.Lock()
	if a.stopped {
		done := a.stopDone
		a.mu.Unlock()
		select {
		case <-done:
			return a.Stats(), a.stopErr
		case <-ctx.Done():
			return a.Stats(), fmt.Errorf("acker: Stop: %w while another Stop was waiting", ctx.Err())
		}
	}
	a.stopped = true
	a.stopDone = make(chan struct{})
	close(a.stopping)
	a.mu.Unlock()
	defer close(a.stopDone)
	for _, e := range a.execs {
		e.in.Close()
		e.gate.close()
	}
	exited := make(chan struct{})
	go func() {
		a.wg.Wait()
		close(exited)
	}()
	tick := time.NewTicker(stopLogEvery)
	defer tick.Stop()
	var late error
wait:
	for {
		select {
		case <-exited:
			break wait
		case <-tick.C:
			a.logWaiting()
		case <-ctx.Done():
			// Past the deadline: closed rings take nothing more, so the
			// executors drop what they hold (counting it) and exit.
			late = ctx.Err()
			for _, r := range a.recvs {
				r.in.Close()
			}
			<-exited
			break wait
		}
	}
	for _, r := range a.recvs {
		r.in.Close()
	}
	a.stopErr = a.stopError(late)
	return a.Stats(), a.stopErr
}

// logWaiting logs the receivers that hold outcomes while Stop waits for
// them: the stopLogged largest backlogs.
func (a *Acker) logWaiting() {
	type held struct {
		r  int
		st ReceiverStats
	}
	var hs []held
	for r := range a.recvs {
		if st := a.recvs[r].Stats(); st.Backlog > 0 {
			hs = append(hs, held{r, st})
		}
	}
	if len(hs) == 0 {
		return
	}
	slices.SortFunc(hs, func(x, y held) int { return y.st.Backlog - x.st.Backlog })
	var b []byte
	for i, h := range hs[:min(len(hs), stopLogged)] {
		if i > 0 {
			b = append(b, "; "...)
		}
		b = fmt.Appendf(b, "receiver %d holds %d outcomes (took %d, last %v ago)", h.r, h.st.Backlog, h.st.Taken, h.st.SinceTake.Round(time.Millisecond))
	}
	if len(hs) > stopLogged {
		b = fmt.Appendf(b, "; %d more receivers", len(hs)-stopLogged)
	}
	a.log.Warn("acker: Stop is waiting for receivers to take their outcomes", "receivers", string(b))
}

// stopError is StopContext's error once the executors exited: the
// receivers whose outcomes were dropped (late: ctx's error), the
// producers whose staged spans were never published, with their count
// (added to each producer's unapplied); nil when neither. Then, the
// shards' applied counts final, it sets counted: NotApplied reads the
// spans it left open from then on (Producer.unseen).
func (a *Acker) stopError(late error) error {
	e := &StopError{Err: late}
	for r, rc := range a.recvs {
		st := rc.Stats()
		if st.Dropped > 0 {
			e.Receivers = append(e.Receivers, UntakenOutcomes{Receiver: r, Dropped: st.Dropped, InRings: st.Backlog})
		}
	}
	for p, pr := range a.producers {
		u := UnflushedProducer{Producer: p}
		for s := range pr.open {
			// A span never published: count what is staged in it and
			// mark it counted, unless the producer retired it first
			// (then it reports them itself).
			o := pr.open[s].Load()
			if o == 0 || o&counted != 0 || !pr.unpublished(o, a.execs[s]) {
				continue
			}
			if c := pr.stagedNow(s); c > 0 && pr.open[s].CompareAndSwap(o, counted|uint64(c)) {
				u.Staged += c
				u.Shards = append(u.Shards, s)
			}
		}
		if u.Staged > 0 {
			pr.unapplied.Add(uint64(u.Staged))
			e.Unflushed = append(e.Unflushed, u)
		}
	}
	a.counted.Store(true)
	if e.Receivers == nil && e.Unflushed == nil {
		return nil // the deadline, if it passed, cost nothing
	}
	return e
}

// StopError is StopContext's error: what stopping could not do, each part
// named. It wraps the context's error when the deadline passed.
type StopError struct {
	// Err is the context's error when its deadline passed (or it was
	// cancelled) before every receiver took its outcomes; nil otherwise.
	Err error
	// Receivers lists, by receiver, the outcomes dropped because the
	// receiver had not taken them when ctx was done.
	Receivers []UntakenOutcomes
	// Unflushed lists the producers that left messages staged and never
	// published (no Flush after their last Send), with how many: not
	// applied.
	Unflushed []UnflushedProducer
}

// UntakenOutcomes is one receiver's loss at Stop: Dropped outcomes its
// rings could not take by the deadline (no outcome comes for those roots:
// replay them from the spout's own records), and InRings outcomes still
// in its rings, which it can take after Stop returns.
type UntakenOutcomes struct {
	Receiver, Dropped, InRings int
}

// UnflushedProducer is a producer that held Staged messages, accepted by
// its sends and never published, in its spans into Shards when Stop
// sealed the rings (at most Batch per shard): not applied, no outcome
// comes for them. The count is exact for a producer not in a call while
// Stop counts; a call that overlaps Stop may stage more after the count,
// which the producer's next call reports (NotAppliedError) and, whether
// or not it makes one, Acker.NotApplied(Producer) counts: each message
// once. Flush before Stop and there is nothing to count.
type UnflushedProducer struct {
	Producer int
	Staged   int
	Shards   []int
}

// NotApplied is how many messages producer p's sends accepted that were
// never applied (no outcome comes for them): those Stop counted staged
// and unpublished (StopError.Unflushed), those p's calls reported after
// (NotAppliedError), and those a send that overlapped Stop staged after
// Stop counted, in a span p has not looked at since (p never called
// again). 0 until Stop; once Stop returned, exact whenever p's goroutine
// is not in a call and its last call happens before this one (the
// caller's own synchronisation: a WaitGroup, a channel); while p is in a
// call it may say less, never more. Safe from any goroutine; p out of
// range panics, naming it and the range.
func (a *Acker) NotApplied(p int) uint64 {
	if p < 0 || p >= len(a.producers) {
		panic(fmt.Sprintf("acker: NotApplied(%d) out of range [0, %d)", p, len(a.producers)))
	}
	pr := a.producers[p]
	n := pr.unapplied.Load() // first: see Producer.unseen
	if !a.counted.Load() {
		return n
	}
	return n + pr.unseen(a.execs)
}

func (e *StopError) Error() string {
	var b strings.Builder
	b.WriteString("acker: Stop")
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	writeList(&b, "outcomes not taken", e.Receivers, func(r UntakenOutcomes) string {
		return fmt.Sprintf("receiver %d dropped %d (%d left in its rings)", r.Receiver, r.Dropped, r.InRings)
	})
	writeList(&b, "staged, never flushed, not applied", e.Unflushed, func(u UnflushedProducer) string {
		return fmt.Sprintf("producer %d: %d in shards %v", u.Producer, u.Staged, u.Shards)
	})
	return b.String()
}

// writeList writes ": what: " and the items, comma-separated, to b;
// nothing when there are none.
func writeList[T any](b *strings.Builder, what string, items []T, item func(T) string) {
	for i, it := range items {
		if i == 0 {
			b.WriteString(": " + what + ": ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(item(it))
	}
}

// Unwrap returns Err: errors.Is(err, context.DeadlineExceeded) holds when
// the deadline passed.
func (e *StopError) Unwrap() error { return e.Err }
