package perf

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/aclements/go-perfevent/events"
	gperf "github.com/aclements/go-perfevent/perf"
	"golang.org/x/sys/unix"
)

// spin does a fixed amount of dependent arithmetic, a few milliseconds'
// worth, that the compiler cannot remove.
//
//go:noinline
func spin() uint64 {
	x := uint64(88172645463325252)
	for range 5_000_000 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

var sink uint64

// touchPages maps fresh anonymous memory and writes one byte per page, so
// that each page faults in: the Go heap may already hold faulted pages.
func touchPages(t *testing.T, pages int) {
	t.Helper()
	size := pages * unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	for i := 0; i < size; i += unix.Getpagesize() {
		mem[i] = 1
	}
}

// block puts the thread to sleep in the kernel, which costs it a voluntary
// context switch. 200µs outlasts the default 50µs timer slack, so the timer
// cannot expire before the thread is descheduled. It is not
// synchronisation: nothing waits for anything.
func block() {
	ts := unix.NsecToTimespec(200_000)
	unix.Nanosleep(&ts, nil)
}

// measure opens g's events, runs the work between Start and Stop, and
// returns the delta, checking the group along the way.
func measure(t *testing.T, g *Group) Sample {
	t.Helper()
	before, err := g.Read()
	if err != nil {
		t.Fatal(err)
	}
	g.Start()
	sink += spin()
	touchPages(t, 64)
	block()
	g.Stop()
	after, err := g.Read()
	if err != nil {
		t.Fatal(err)
	}
	return after.Sub(before)
}

// checkSoftware asserts what every mode but modeNone measures.
func checkSoftware(t *testing.T, d Sample) {
	t.Helper()
	if v := d.Get(TaskClock); !v.OK || v.N == 0 {
		t.Errorf("task-clock over a busy loop = %v, want > 0", v)
	}
	// 64 fresh pages fault at least once (fault-around may map neighbours
	// in one fault, so not necessarily 64 times).
	if v := d.Get(PageFaults); !v.OK || v.N == 0 {
		t.Errorf("page-faults over 64 fresh pages = %v, want > 0", v)
	}
	if v := d.Get(ContextSwitches); !v.OK || v.N == 0 {
		t.Errorf("context-switches over a nanosleep = %v, want > 0", v)
	}
}

// TestCounters asserts what this machine lets us observe: either hardware
// counters work and count cycles over a busy loop, or the note says why not
// and the software events still count.
func TestCounters(t *testing.T) {
	st := Probe()
	t.Logf("mode %s: %s", st.mode, st.Note())
	g, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	d := measure(t, g)
	t.Logf("delta: %s", d)

	switch st.mode {
	case modeHardware:
		if v := d.Get(Cycles); st.Available(Cycles) && (!v.OK || v.N == 0) {
			t.Errorf("cycles over a busy loop = %v, want > 0", v)
		}
		if v := d.Get(Instructions); st.Available(Instructions) && (!v.OK || v.N < 5_000_000) {
			t.Errorf("instructions over a 5M-iteration loop = %v, want >= 5M", v)
		}
	case modeSoftware, modeThreadClock:
		if st.Err == nil || !strings.Contains(st.Note(), st.Err.Error()) {
			t.Errorf("note %q does not carry the reason %v", st.Note(), st.Err)
		}
		if st.mode == modeSoftware && !strings.HasPrefix(st.Note(), "hardware counters unavailable (") {
			t.Errorf("note %q does not say hardware counters are unavailable", st.Note())
		}
	default:
		t.Fatalf("mode %s on Linux", st.mode)
	}
	for e := range NumEvents {
		if v := d.Get(e); v.OK != st.Available(e) || g.measures(e) != st.Available(e) {
			t.Errorf("%s: value %v, measured %v, but Probe says available = %v", e, v, g.measures(e), st.Available(e))
		}
		if !st.Available(e) && st.eventError(e) == nil {
			t.Errorf("%s unavailable without a reason", e)
		}
	}
	checkSoftware(t, d)
}

// errOpen fails every perf_event_open as an unprivileged process at
// perf_event_paranoid 2 would.
func errOpen(gperf.Target, ...events.Event) (*gperf.Counter, error) {
	return nil, syscall.EACCES
}

// TestThreadClockFallback forces the path where perf_event_open is refused
// and checks that the pure-Go measure takes over and says so.
func TestThreadClockFallback(t *testing.T) {
	st := probeWith(errOpen, readThread)
	if st.mode != modeThreadClock {
		t.Fatalf("mode %s with perf_event_open refused, want %s", st.mode, modeThreadClock)
	}
	note := st.Note()
	if !strings.Contains(note, "perf_event_open unusable") || !strings.Contains(note, "permission denied") {
		t.Errorf("note %q does not say perf_event_open was refused and why", note)
	}
	g, err := openWith(st, errOpen, allEvents)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	d := measure(t, g)
	t.Logf("delta: %s", d)
	for _, e := range []Event{Cycles, Instructions, CacheMisses, BranchMisses} {
		if v := d.Get(e); v.OK {
			t.Errorf("%s = %v without perf_event_open, want n/a", e, v)
		}
	}
	checkSoftware(t, d)

	// With the fallback broken too, nothing is measurable and Open says so.
	broken := func() (threadReading, error) { return threadReading{}, syscall.ENOSYS }
	st = probeWith(errOpen, broken)
	if st.mode != modeNone {
		t.Fatalf("mode %s with everything refused, want %s", st.mode, modeNone)
	}
	if _, err := openWith(st, errOpen, allEvents); err == nil || !errors.Is(err, syscall.EACCES) {
		t.Errorf("openWith(modeNone) = %v, want an error carrying EACCES", err)
	}
}

// TestSoftwareOnlyFallback forces the VM case: hardware events fail with
// ENOENT, software events work.
func TestSoftwareOnlyFallback(t *testing.T) {
	noPMU := func(target gperf.Target, evs ...events.Event) (*gperf.Counter, error) {
		var attr unix.PerfEventAttr
		evs[0].SetAttrs(&attr)
		if attr.Type == unix.PERF_TYPE_HARDWARE {
			return nil, syscall.ENOENT
		}
		return gperf.OpenCounter(target, evs...)
	}
	st := probeWith(noPMU, readThread)
	if st.mode == modeThreadClock {
		t.Skipf("perf_event_open refused here: %v", st.Err)
	}
	if st.mode != modeSoftware {
		t.Fatalf("mode %s with no PMU, want %s", st.mode, modeSoftware)
	}
	want := "hardware counters unavailable (perf_event_open cycles: no such file or directory"
	if note := st.Note(); !strings.HasPrefix(note, want) || !strings.HasSuffix(note, "; using software events") {
		t.Errorf("note %q, want %q...; using software events", note, want)
	}
}

func TestStopFreezes(t *testing.T) {
	g, err := Open(TaskClock)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.Start()
	sink += spin()
	g.Stop()
	a, err := g.Read()
	if err != nil {
		t.Fatal(err)
	}
	sink += spin() // not counted
	b, err := g.Read()
	if err != nil {
		t.Fatal(err)
	}
	if a.Get(TaskClock) != b.Get(TaskClock) || !a.Get(TaskClock).OK {
		t.Errorf("task-clock moved while stopped: %v then %v", a.Get(TaskClock), b.Get(TaskClock))
	}
	if g.measures(Cycles) || a.Get(Cycles).OK {
		t.Errorf("cycles measured though only task-clock was asked for")
	}
}

func TestReadAllocs(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func() (*Group, error)
	}{
		{"probed", func() (*Group, error) { return Open() }},
		{"threadclock", func() (*Group, error) { return openWith(probeWith(errOpen, readThread), errOpen, allEvents) }},
	} {
		g, err := tc.open()
		if err != nil {
			t.Fatal(err)
		}
		g.Start()
		if n := testing.AllocsPerRun(100, func() { _, _ = g.Read() }); n != 0 {
			t.Errorf("%s: Read allocates %v times", tc.name, n)
		}
		g.Close()
	}
}

func TestClose(t *testing.T) {
	g, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	g.Start()
	g.Close()
	g.Close() // idempotent: must not unlock the thread twice
	g.Start() // does nothing
	if _, err := g.Read(); err == nil || !strings.HasPrefix(err.Error(), "perf: ") {
		t.Errorf("Read after Close = %v, want a perf error", err)
	}
}
