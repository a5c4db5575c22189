package perf

import (
	"strconv"
	"strings"
)

// NA is how an unavailable value prints.
const NA = "n/a"

// Value is one event's count. OK is false when the count is unknown: the
// event could not be opened on this machine, or was never scheduled onto the
// hardware while enabled. An unknown value is never presented as zero; the
// zero Value is unknown.
type Value struct {
	N  uint64
	OK bool
}

// String renders the count in decimal, or "n/a" when it is unknown.
func (v Value) String() string {
	if !v.OK {
		return NA
	}
	return strconv.FormatUint(v.N, 10)
}

// PerOp returns the count divided by ops, and whether that is known: it is
// not when the count is unknown or ops is not positive.
func (v Value) PerOp(ops int) (float64, bool) {
	if !v.OK || ops <= 0 {
		return 0, false
	}
	return float64(v.N) / float64(ops), true
}

// FormatPerOp renders PerOp for a table: three significant digits (no
// exponent above 1), or "n/a".
func (v Value) FormatPerOp(ops int) string {
	x, ok := v.PerOp(ops)
	if !ok {
		return NA
	}
	switch {
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case x >= 1:
		return strconv.FormatFloat(x, 'f', 2, 64)
	default:
		return strconv.FormatFloat(x, 'g', 3, 64)
	}
}

// Sample is a reading of a Group: each event's count since Open, with the
// times the kernel needs to correct for multiplexing. Subtract two Samples
// to get the counts of the phase between them.
//
// The zero Sample measured nothing: every Value in it is unknown.
type Sample struct {
	// measured holds the events this Sample has counts for.
	measured eventSet
	// count is each event's raw count while it was counting.
	count [NumEvents]uint64
	// enabled and running are the nanoseconds each event was enabled
	// (started) and actually counting. running < enabled when the kernel
	// multiplexed more hardware events than the PMU has counters; the
	// count is then scaled by enabled/running. The pure-Go fallback does
	// not multiplex and leaves both zero.
	enabled [NumEvents]uint64
	running [NumEvents]uint64
}

// Get returns e's count, scaled for multiplexing. It is unknown if the
// Sample did not measure e, or if e was enabled but never counted.
func (s Sample) Get(e Event) Value {
	if e >= NumEvents || !s.measured.has(e) {
		return Value{}
	}
	count, enabled, running := s.count[e], s.enabled[e], s.running[e]
	switch {
	case enabled == running:
		return Value{N: count, OK: true}
	case running == 0:
		return Value{}
	default:
		return Value{N: uint64(float64(count) * float64(enabled) / float64(running)), OK: true}
	}
}

// Sub returns the counts between prev and s, where prev was read earlier
// from the same Group. Scaling then uses the phase's own enabled and running
// times, not the totals since Open. An event is known in the result only if
// it is known in both; if any of its counts went backwards (prev is not
// earlier, or comes from another Group) it is unknown.
func (s Sample) Sub(prev Sample) Sample {
	var d Sample
	for e := range NumEvents {
		if !s.measured.has(e) || !prev.measured.has(e) ||
			s.count[e] < prev.count[e] || s.enabled[e] < prev.enabled[e] || s.running[e] < prev.running[e] {
			continue
		}
		d.measured.add(e)
		d.count[e] = s.count[e] - prev.count[e]
		d.enabled[e] = s.enabled[e] - prev.enabled[e]
		d.running[e] = s.running[e] - prev.running[e]
	}
	return d
}

// String lists every event as name=value, with "n/a" for unknown values and
// "ns" after task-clock:
// "cycles=n/a instructions=n/a ... task-clock=1520873ns context-switches=0 page-faults=3".
func (s Sample) String() string {
	var sb strings.Builder
	for e := range NumEvents {
		if e > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(e.String())
		sb.WriteByte('=')
		v := s.Get(e)
		sb.WriteString(v.String())
		if e == TaskClock && v.OK {
			sb.WriteString("ns")
		}
	}
	return sb.String()
}
