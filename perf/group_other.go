//go:build !linux

package perf

import (
	"errors"
	"fmt"
	"runtime"
)

// groupOS is empty: no Group is ever opened here.
type groupOS struct{}

func probe() Status {
	err := fmt.Errorf("perf_event_open is Linux-only, this is %s: %w", runtime.GOOS, errors.ErrUnsupported)
	st := Status{mode: modeNone, Err: err}
	for e := range NumEvents {
		st.eventErr[e] = err
	}
	return st
}

// Open would count events on the calling thread; only Linux supports it.
// It returns an error wrapping errors.ErrUnsupported. Probe().Note() says the
// same in words for a report.
func Open(events ...Event) (*Group, error) {
	eventsOf(events) // same panics as on Linux
	return nil, fmt.Errorf("perf: counters on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func (g *Group) startOS()                {}
func (g *Group) stopOS()                 {}
func (g *Group) readOS() (Sample, error) { return Sample{}, nil }
func (g *Group) closeOS()                {}
