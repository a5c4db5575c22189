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

// openOS is Open where only Linux counts: an error wrapping
// errors.ErrUnsupported.
func openOS(eventSet) (*Group, error) {
	return nil, fmt.Errorf("perf: counters on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func (g *Group) startOS()                {}
func (g *Group) stopOS()                 {}
func (g *Group) readOS() (Sample, error) { return Sample{}, nil }
func (g *Group) closeOS()                {}
