package perf

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/aclements/go-perfevent/events"
	gperf "github.com/aclements/go-perfevent/perf"
	"golang.org/x/sys/unix"
)

// perfEvent describes an event to go-perfevent, which supplies the events
// package for cycles, instructions and cache misses but not for branch
// misses or software events.
type perfEvent struct {
	name   string
	typ    uint32
	config uint64
}

func (p perfEvent) String() string { return p.name }

func (p perfEvent) SetAttrs(a *unix.PerfEventAttr) error {
	a.Type = p.typ
	a.Config = p.config
	return nil
}

var perfEvents = [NumEvents]events.Event{
	Cycles:          events.EventCPUCycles,
	Instructions:    events.EventInstructions,
	CacheMisses:     events.EventCacheMisses,
	BranchMisses:    perfEvent{"branch-misses", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_BRANCH_MISSES},
	TaskClock:       perfEvent{"task-clock", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_TASK_CLOCK},
	ContextSwitches: perfEvent{"context-switches", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CONTEXT_SWITCHES},
	PageFaults:      perfEvent{"page-faults", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_PAGE_FAULTS},
}

// openFunc is gperf.OpenCounter; tests substitute failures.
type openFunc func(gperf.Target, ...events.Event) (*gperf.Counter, error)

// groupOS holds, per event, either a perf counter or, in modeThreadClock,
// nothing: the thread clock stands in for the software events.
type groupOS struct {
	counters [NumEvents]*gperf.Counter
	clock    *threadClock
}

func probe() Status { return probeWith(gperf.OpenCounter, readThread) }

// probeWith opens and closes each event once on a locked thread and decides
// the mode. Each event is opened on its own, so one that fails does not take
// the others with it.
func probeWith(open openFunc, fallback func() (threadReading, error)) Status {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	var st Status
	for e := range NumEvents {
		c, err := open(gperf.TargetThisGoroutine, perfEvents[e])
		if err != nil {
			st.eventErr[e] = explainOpen(e, err)
			continue
		}
		c.Close()
		st.avail.add(e)
	}
	const hardware = eventSet(1)<<(BranchMisses+1) - 1
	switch {
	case st.avail&hardware != 0:
		st.mode = modeHardware
		st.Err = errors.Join(st.eventErr[:]...)
	case st.avail != 0:
		st.mode = modeSoftware
		st.Err = st.eventErr[Cycles]
	default:
		// perf_event_open is unusable: count the software events without it.
		// The task-clock error stands for the rest; they fail alike.
		why := st.eventErr[TaskClock]
		if _, err := fallback(); err != nil {
			st.mode = modeNone
			st.Err = errors.Join(why, err)
			return st
		}
		st.mode = modeThreadClock
		st.Err = why
		for _, e := range [...]Event{TaskClock, ContextSwitches, PageFaults} {
			st.avail.add(e)
			st.eventErr[e] = nil
		}
	}
	return st
}

// explainOpen names the event in a perf_event_open error and adds what the
// errno usually means, when go-perfevent has not already.
func explainOpen(e Event, err error) error {
	var hint string
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EOPNOTSUPP):
		if e.hardware() {
			hint = " (the kernel has no PMU for it; usual in a VM)"
		}
	case errors.Is(err, unix.EPERM):
		hint = " (denied by seccomp or kernel.perf_event_paranoid)"
	case errors.Is(err, unix.ENOSYS):
		hint = " (kernel without perf events, or the call is filtered)"
	}
	return fmt.Errorf("perf_event_open %s: %w%s", e, err, hint)
}

// openOS is Open on Linux.
func openOS(want eventSet) (*Group, error) {
	return openWith(Probe(), gperf.OpenCounter, want)
}

func openWith(st Status, open openFunc, want eventSet) (*Group, error) {
	if st.mode == modeNone {
		return nil, fmt.Errorf("perf: no per-thread counters: %w", st.Err)
	}
	g := &Group{events: want & st.avail}
	runtime.LockOSThread()
	if st.mode == modeThreadClock {
		g.os.clock = &threadClock{}
		return g, nil
	}
	for e := range NumEvents {
		if !g.events.has(e) {
			continue
		}
		c, err := open(gperf.TargetThisGoroutine, perfEvents[e])
		if err != nil {
			g.closeOS()
			return nil, fmt.Errorf("perf: opening %s: %w", e, err)
		}
		g.os.counters[e] = c
	}
	return g, nil
}

// startOS enables software counters before hardware ones and stopOS
// disables them in the opposite order, so the hardware counts include as
// little of this bookkeeping as possible.
func (g *Group) startOS() {
	if c := g.os.clock; c != nil {
		g.setErr(c.start())
		return
	}
	for e := NumEvents; e > 0; e-- {
		g.os.counters[e-1].Start() // nil-safe
	}
}

func (g *Group) stopOS() {
	if c := g.os.clock; c != nil {
		g.setErr(c.stop())
		return
	}
	for _, c := range g.os.counters {
		c.Stop()
	}
}

func (g *Group) setErr(err error) {
	if err != nil && g.err == nil {
		g.err = err
	}
}

func (g *Group) readOS() (Sample, error) {
	var s Sample
	if c := g.os.clock; c != nil {
		r, err := c.read()
		if err != nil {
			return Sample{}, err
		}
		s.count[TaskClock], s.count[ContextSwitches], s.count[PageFaults] = r.cpuNanos, r.switches, r.faults
		s.measured = g.events
		return s, nil
	}
	for e, c := range g.os.counters {
		if c == nil {
			continue
		}
		n, err := c.ReadOne()
		if err != nil {
			return Sample{}, fmt.Errorf("perf: reading %s: %w", Event(e), err)
		}
		s.count[e], s.enabled[e], s.running[e] = n.RawValue, n.TimeEnabled, n.TimeRunning
	}
	s.measured = g.events
	return s, nil
}

// closeOS closes each counter, which undoes the thread lock go-perfevent
// took for it, then undoes the lock Open took.
func (g *Group) closeOS() {
	for e, c := range g.os.counters {
		if c != nil {
			c.Close()
			g.os.counters[e] = nil
		}
	}
	runtime.UnlockOSThread()
}
