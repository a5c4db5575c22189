package perf

import "errors"

var errClosed = errors.New("perf: Group is closed")

// Group counts a set of events on one OS thread: the thread of the
// goroutine that called Open, which Open locks to it until Close.
//
// Start and Stop bracket what is counted; Read returns the totals so far
// and works whether the Group is running or not. A Group is not safe for
// concurrent use, and every method must be called from the goroutine that
// called Open (the fallback measures "the calling thread").
type Group struct {
	// events holds the events this Group counts: those asked for that the
	// machine has. Immutable after Open.
	events eventSet
	// running is true between Start and Stop.
	running bool
	// closed is set by Close; the Group does nothing afterwards.
	closed bool
	// err is the first error from Start or Stop, reported by Read.
	err error

	os groupOS
}

// measures reports whether g counts e; Values for other events are unknown.
func (g *Group) measures(e Event) bool { return e < NumEvents && g.events.has(e) }

// Start starts counting; it does nothing if g is running or closed. Errors
// are rare and reported by the next Read.
func (g *Group) Start() {
	if g.running || g.closed {
		return
	}
	g.running = true
	g.startOS()
}

// Stop stops counting; it does nothing if g is stopped or closed.
func (g *Group) Stop() {
	if !g.running || g.closed {
		return
	}
	g.stopOS()
	g.running = false
}

// Read returns the counts since Open, over the time g was running. Read does
// not allocate.
func (g *Group) Read() (Sample, error) {
	if g.closed {
		return Sample{}, errClosed
	}
	if g.err != nil {
		return Sample{}, g.err
	}
	return g.readOS()
}

// Close releases the counters and unlocks the goroutine from its thread.
// Later calls do nothing.
func (g *Group) Close() {
	if g.closed {
		return
	}
	g.Stop()
	g.closeOS()
	g.closed = true
}

// Open counts the given events, or the default set (every Event) if none
// are given, on the calling goroutine's thread, which it locks to the
// goroutine until Close. The Group starts stopped.
//
// Events this machine cannot count (see Probe) are left out and read as
// unknown; Open fails only if nothing per-thread can be measured at all, or
// if an event that Probe could open now fails. It panics on an Event outside
// [0, NumEvents). Only Linux counts: elsewhere Open returns an error
// wrapping errors.ErrUnsupported, and Probe().Note() says the same in
// words for a report.
func Open(events ...Event) (*Group, error) { return openOS(eventsOf(events)) }
