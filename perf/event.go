package perf

import "strconv"

// Event names one thing a Group counts.
type Event uint8

// The default event set. The first four are hardware events, counted by the
// CPU's performance monitoring unit (PMU); the rest are software events,
// counted by the kernel.
const (
	Cycles       Event = iota // CPU cycles (PERF_COUNT_HW_CPU_CYCLES)
	Instructions              // instructions retired
	CacheMisses               // cache misses; on x86 last-level cache misses
	BranchMisses              // mispredicted branches

	TaskClock       // CPU time of the thread, in nanoseconds
	ContextSwitches // voluntary and involuntary context switches
	PageFaults      // minor and major page faults

	// NumEvents is the number of events; range over it to visit them all:
	// for e := range perf.NumEvents.
	NumEvents
)

var eventNames = [NumEvents]string{
	Cycles:          "cycles",
	Instructions:    "instructions",
	CacheMisses:     "cache-misses",
	BranchMisses:    "branch-misses",
	TaskClock:       "task-clock",
	ContextSwitches: "context-switches",
	PageFaults:      "page-faults",
}

// String returns the event's name as perf stat spells it, e.g.
// "cache-misses".
func (e Event) String() string {
	if e >= NumEvents {
		return "Event(" + strconv.Itoa(int(e)) + ")"
	}
	return eventNames[e]
}

// Unit names what a count of e is measured in, for a benchmark metric such
// as "cycles/op": the event name, except "task-clock-ns" for TaskClock.
func (e Event) Unit() string {
	if e == TaskClock {
		return "task-clock-ns"
	}
	return e.String()
}

// hardware reports whether e is counted by the PMU, which virtual machines
// often do not expose.
func (e Event) hardware() bool { return e <= BranchMisses }

// eventSet is a set of events, one bit per Event.
type eventSet uint16

// allEvents holds every Event. NumEvents must stay within eventSet's 16 bits.
const allEvents = eventSet(1)<<NumEvents - 1

func (s eventSet) has(e Event) bool { return s&(1<<e) != 0 }

func (s *eventSet) add(e Event) { *s |= 1 << e }

// eventsOf returns the set of the given events, or every event if none are
// given. It panics on an Event outside [0, NumEvents): events are constants
// in the caller's code, so a bad one is a programming error.
func eventsOf(evs []Event) eventSet {
	if len(evs) == 0 {
		return allEvents
	}
	var s eventSet
	for _, e := range evs {
		if e >= NumEvents {
			panic("perf: unknown event " + e.String())
		}
		s.add(e)
	}
	return s
}
