package perf

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// threadReading is what the kernel reports about the calling thread without
// perf_event_open.
type threadReading struct {
	cpuNanos uint64 // clock_gettime(CLOCK_THREAD_CPUTIME_ID)
	switches uint64 // getrusage(RUSAGE_THREAD): ru_nvcsw + ru_nivcsw
	faults   uint64 // getrusage(RUSAGE_THREAD): ru_minflt + ru_majflt
}

func (r threadReading) sub(s threadReading) threadReading {
	return threadReading{r.cpuNanos - s.cpuNanos, r.switches - s.switches, r.faults - s.faults}
}

func (r threadReading) add(s threadReading) threadReading {
	return threadReading{r.cpuNanos + s.cpuNanos, r.switches + s.switches, r.faults + s.faults}
}

// readThread reads the calling thread's CPU time, context switches and page
// faults: the same quantities as perf's task-clock, context-switches and
// page-faults, counted by the kernel for every thread anyway.
func readThread() (threadReading, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return threadReading{}, fmt.Errorf("perf: clock_gettime(CLOCK_THREAD_CPUTIME_ID): %w", err)
	}
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return threadReading{}, fmt.Errorf("perf: getrusage(RUSAGE_THREAD): %w", err)
	}
	return threadReading{
		cpuNanos: uint64(ts.Nano()),
		switches: uint64(ru.Nvcsw + ru.Nivcsw),
		faults:   uint64(ru.Minflt + ru.Majflt),
	}, nil
}

// threadClock gives the kernel's always-on per-thread totals the
// start/stop behaviour of a perf counter: it sums the intervals between
// start and stop.
type threadClock struct {
	running bool
	since   threadReading // reading at the last start
	total   threadReading // sum over finished intervals
}

func (c *threadClock) start() error {
	r, err := readThread()
	if err != nil {
		return err
	}
	c.since, c.running = r, true
	return nil
}

// stop ends the interval even when the reading fails; the interval is then
// lost and the error says so.
func (c *threadClock) stop() error {
	c.running = false
	r, err := readThread()
	if err != nil {
		return err
	}
	c.total = c.total.add(r.sub(c.since))
	return nil
}

func (c *threadClock) read() (threadReading, error) {
	if !c.running {
		return c.total, nil
	}
	r, err := readThread()
	if err != nil {
		return threadReading{}, err
	}
	return c.total.add(r.sub(c.since)), nil
}
