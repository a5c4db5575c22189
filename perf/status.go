package perf

import (
	"fmt"
	"strings"
	"sync"
)

// mode says how much this machine lets a Group count, best first.
type mode uint8

const (
	// modeNone: nothing per-thread can be measured; Open fails. This is the
	// mode on systems other than Linux.
	modeNone mode = iota
	// modeThreadClock: perf_event_open cannot be used (not permitted by
	// kernel.perf_event_paranoid or seccomp, or absent), so the software
	// events come from clock_gettime(CLOCK_THREAD_CPUTIME_ID) and
	// getrusage(RUSAGE_THREAD) instead. Hardware events are unknown.
	modeThreadClock
	// modeSoftware: perf_event_open works but the hardware events do not
	// open, as in most virtual machines. Hardware events are unknown.
	modeSoftware
	// modeHardware: at least one hardware event opens; Status.Err lists any
	// that do not.
	modeHardware
)

var modeNames = [...]string{modeNone: "none", modeThreadClock: "thread-clock", modeSoftware: "software", modeHardware: "hardware"}

func (m mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Status is what Probe found out about this machine's counters.
type Status struct {
	mode mode
	// Err says why the mode (see Note) is not better, or, in the hardware
	// mode, which events failed to open; nil when every event is
	// available.
	Err error

	// avail holds the events Open can count in this mode.
	avail eventSet
	// eventErr holds why each unavailable event is unavailable.
	eventErr [NumEvents]error
}

// Available reports whether Open can count e on this machine.
func (s Status) Available(e Event) bool { return e < NumEvents && s.avail.has(e) }

// eventError returns why e is unavailable, or nil if it is available.
func (s Status) eventError(e Event) error {
	if e >= NumEvents {
		return fmt.Errorf("perf: unknown event %s", e)
	}
	return s.eventErr[e]
}

// Note is a one-line account of what will be measured and why, for a
// benchmark report. The library never prints it; the caller does.
// Examples:
//
//	hardware and software counters available
//	hardware counters unavailable (perf_event_open cycles: no such file or directory: ...); using software events
//	perf_event_open unusable (...); using thread CPU time and getrusage for task-clock, context-switches, page-faults
func (s Status) Note() string {
	switch s.mode {
	case modeHardware:
		var missing []string
		for e := range NumEvents {
			if !s.avail.has(e) {
				missing = append(missing, fmt.Sprintf("%s: %v", e, s.eventErr[e]))
			}
		}
		if len(missing) == 0 {
			return "hardware and software counters available"
		}
		return fmt.Sprintf("some counters unavailable (%s); they read n/a", strings.Join(missing, "; "))
	case modeSoftware:
		return fmt.Sprintf("hardware counters unavailable (%v); using software events", s.Err)
	case modeThreadClock:
		return fmt.Sprintf("perf_event_open unusable (%v); using thread CPU time and getrusage for task-clock, context-switches, page-faults", s.Err)
	default:
		return fmt.Sprintf("no per-thread counters (%v); every column reads n/a", s.Err)
	}
}

var probeOnce = sync.OnceValue(probe)

// Probe reports which events Open can count on this machine. The first call
// opens and closes each event once on the calling thread; the result is
// kept, so later calls, and Open, do not try again what failed.
func Probe() Status { return probeOnce() }
