package perf

import (
	"errors"
	"strings"
	"testing"
)

func TestValueFormat(t *testing.T) {
	// Unknown is n/a whatever the ops; a stray N never shows.
	for _, v := range []Value{{}, {N: 1234, OK: false}} {
		for _, ops := range []int{-1, 0, 1, 10} {
			if s, p := v.String(), v.FormatPerOp(ops); s != "n/a" || p != "n/a" {
				t.Errorf("%+v: String() = %q, FormatPerOp(%d) = %q, want n/a", v, s, ops, p)
			}
			if x, ok := v.PerOp(ops); ok {
				t.Errorf("%+v.PerOp(%d) = %v, known; want unknown", v, ops, x)
			}
		}
	}
	for _, tc := range []struct {
		v     Value
		ops   int
		str   string
		perOp string
	}{
		{Value{N: 0, OK: true}, 10, "0", "0"},
		{Value{N: 1234, OK: true}, 0, "1234", "n/a"}, // no ops, no rate
		{Value{N: 1234, OK: true}, -1, "1234", "n/a"},
		{Value{N: 123456, OK: true}, 1, "123456", "123456"},
		{Value{N: 1234, OK: true}, 100, "1234", "12.3"},
		{Value{N: 1234, OK: true}, 1000, "1234", "1.23"},
		{Value{N: 1234, OK: true}, 10000, "1234", "0.123"},
		{Value{N: 3, OK: true}, 1000000, "3", "3e-06"},
	} {
		if got := tc.v.String(); got != tc.str {
			t.Errorf("%+v.String() = %q, want %q", tc.v, got, tc.str)
		}
		if got := tc.v.FormatPerOp(tc.ops); got != tc.perOp {
			t.Errorf("%+v.FormatPerOp(%d) = %q, want %q", tc.v, tc.ops, got, tc.perOp)
		}
	}
}

// sample builds a Sample measuring the given events with count = enabled =
// running = n, unless changed afterwards.
func sample(n uint64, evs ...Event) Sample {
	var s Sample
	for _, e := range evs {
		s.measured.add(e)
		s.count[e], s.enabled[e], s.running[e] = n, n, n
	}
	return s
}

func TestSampleGet(t *testing.T) {
	s := sample(100, TaskClock, Cycles, Instructions)
	s.enabled[Cycles], s.running[Cycles] = 1000, 250 // counted a quarter of the time
	s.enabled[Instructions], s.running[Instructions] = 1000, 0

	for _, tc := range []struct {
		e    Event
		want Value
	}{
		{TaskClock, Value{N: 100, OK: true}},
		{Cycles, Value{N: 400, OK: true}}, // scaled by enabled/running
		{Instructions, Value{}},           // enabled, never scheduled: unknown, not 0
		{PageFaults, Value{}},             // not measured
		{NumEvents, Value{}},              // not an event
	} {
		if got := s.Get(tc.e); got != tc.want {
			t.Errorf("Get(%s) = %+v, want %+v", tc.e, got, tc.want)
		}
	}
	if got := (Sample{}).Get(TaskClock); got.OK {
		t.Errorf("zero Sample: Get(TaskClock) = %+v, want unknown", got)
	}
}

func TestSampleSub(t *testing.T) {
	prev := sample(100, TaskClock, PageFaults, Cycles)
	prev.enabled[Cycles], prev.running[Cycles] = 1000, 1000 // not multiplexed before
	cur := sample(300, TaskClock, PageFaults, Cycles, BranchMisses)
	cur.count[Cycles], cur.enabled[Cycles], cur.running[Cycles] = 200, 2000, 1100 // multiplexed in the phase

	d := cur.Sub(prev)
	if got := d.Get(TaskClock); got != (Value{N: 200, OK: true}) {
		t.Errorf("TaskClock delta = %+v, want 200", got)
	}
	// The phase counted 100 in 100 of its 1000 enabled ns: 1000, not the
	// 200*2000/1100 = 363 that scaling by totals would give.
	if got := d.Get(Cycles); got != (Value{N: 1000, OK: true}) {
		t.Errorf("Cycles delta = %+v, want 1000", got)
	}
	if got := d.Get(BranchMisses); got.OK {
		t.Errorf("BranchMisses measured on one side only: %+v, want unknown", got)
	}

	// Subtracting the wrong way round gives unknowns, not huge numbers.
	back := prev.Sub(cur)
	for e := range NumEvents {
		if v := back.Get(e); v.OK {
			t.Errorf("reversed Sub: %s = %+v, want unknown", e, v)
		}
	}
}

func TestSampleString(t *testing.T) {
	s := sample(7, TaskClock, ContextSwitches, PageFaults)
	s.count[ContextSwitches] = 0
	want := "cycles=n/a instructions=n/a cache-misses=n/a branch-misses=n/a task-clock=7ns context-switches=0 page-faults=7"
	if got := s.String(); got != want {
		t.Errorf("String() =\n%q, want\n%q", got, want)
	}
}

func TestStatusNote(t *testing.T) {
	errHW := errors.New("perf_event_open cycles: no such file or directory")
	errPerm := errors.New("perf_event_open task-clock: permission denied")
	full := Status{mode: modeHardware, avail: allEvents}
	partial := Status{mode: modeHardware, avail: allEvents &^ (1 << BranchMisses), Err: errHW}
	partial.eventErr[BranchMisses] = errors.New("operation not supported")
	for _, tc := range []struct {
		st   Status
		want []string
	}{
		{full, []string{"hardware and software counters available"}},
		{partial, []string{"some counters unavailable", "branch-misses: operation not supported", "n/a"}},
		{Status{mode: modeSoftware, Err: errHW}, []string{"hardware counters unavailable (" + errHW.Error() + "); using software events"}},
		{Status{mode: modeThreadClock, Err: errPerm}, []string{"perf_event_open unusable (" + errPerm.Error() + ")", "thread CPU time"}},
		{Status{mode: modeNone, Err: errors.ErrUnsupported}, []string{"no per-thread counters", "n/a"}},
	} {
		note := tc.st.Note()
		for _, w := range tc.want {
			if !strings.Contains(note, w) {
				t.Errorf("%s Note() = %q, want it to contain %q", tc.st.mode, note, w)
			}
		}
		if strings.Contains(note, "\n") {
			t.Errorf("%s Note() spans lines: %q", tc.st.mode, note)
		}
	}
}

func TestEventNames(t *testing.T) {
	seen := map[string]bool{}
	for e := range NumEvents {
		name := e.String()
		if name == "" || seen[name] || strings.HasPrefix(name, "Event(") {
			t.Errorf("event %d has a bad or repeated name %q", e, name)
		}
		seen[name] = true
		if e.hardware() != (e < TaskClock) {
			t.Errorf("%s: hardware() = %v", e, e.hardware())
		}
	}
	if got := NumEvents.String(); got != "Event(7)" {
		t.Errorf("NumEvents.String() = %q", got)
	}
	if got := TaskClock.Unit(); got != "task-clock-ns" {
		t.Errorf("TaskClock.Unit() = %q", got)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "Event(9)") {
			t.Errorf("eventsOf(9) recovered %v, want a panic naming Event(9)", r)
		}
	}()
	eventsOf([]Event{9})
}
