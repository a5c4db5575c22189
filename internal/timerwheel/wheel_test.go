package timerwheel

import (
	"math"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/xorack/xorack/internal/invariants"
)

// mustPanic fails unless f panics with a message containing want.
func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic, want one containing %q", want)
		}
		var msg string
		switch v := r.(type) {
		case string:
			msg = v
		case error:
			msg = v.Error()
		}
		if !strings.Contains(msg, want) {
			t.Fatalf("panic %q, want one containing %q", msg, want)
		}
	}()
	f()
}

// mustVerify fails the test if the wheel's invariants are broken.
func mustVerify(t *testing.T, w *Wheel) {
	t.Helper()
	if err := w.verify(); err != nil {
		t.Fatal(err)
	}
}

// drain expires everything due at now and returns the handles in order.
func drain(w *Wheel, now Tick) []Handle {
	var got []Handle
	w.Advance(now, func(h Handle) { got = append(got, h) })
	return got
}

func TestNodeSize(t *testing.T) {
	if got := unsafe.Sizeof(node{}); got != NodeBytes || NodeBytes != 12 {
		t.Fatalf("node is %d bytes, NodeBytes %d, want 12", got, NodeBytes)
	}
	if got := unsafe.Alignof(node{}); got != 4 {
		t.Fatalf("node alignment %d, want 4 (no 8-byte field)", got)
	}
	if got, want := New(10, 0).Bytes(), (10+numBuckets)*NodeBytes; got != want {
		t.Fatalf("Bytes() = %d for capacity 10, want %d", got, want)
	}
}

func TestConstants(t *testing.T) {
	const day = 24 * 60 * 60 * 1000 // ticks of 1 ms
	if MaxDelay < day {
		t.Errorf("MaxDelay %d does not cover 24 h at 1 ms (%d ticks)", MaxDelay, day)
	}
	if MaxDelay >= math.MaxInt32 {
		t.Errorf("MaxDelay %d: a deadline's distance from now must fit an int32", MaxDelay)
	}
	if MaxDelay >= 1<<wheelBits {
		t.Errorf("MaxDelay %d reaches past the wheel's span 2^%d: the top ring would alias", MaxDelay, wheelBits)
	}
	if uint64(MaxCapacity)+numBuckets > unlinked {
		t.Errorf("MaxCapacity %d + %d sentinels collides with the unlinked value", uint64(MaxCapacity), numBuckets)
	}
	if slotsPerLevel != 64 {
		t.Errorf("%d slots per level: the occupancy bitmap is one uint64", slotsPerLevel)
	}
}

func TestNewPanics(t *testing.T) {
	mustPanic(t, "capacity 0 out of range", func() { New(0, 0) })
	mustPanic(t, "capacity -1 out of range", func() { New(-1, 0) })
	if limit := uint64(MaxCapacity); limit < math.MaxInt { // one past the limit must panic before allocating
		mustPanic(t, "out of range [1, ", func() { New(int(limit+1), 0) })
	}
	w := New(3, 42)
	if w.Capacity() != 3 || w.Now() != 42 || w.Len() != 0 {
		t.Fatalf("New(3, 42): capacity %d now %d len %d", w.Capacity(), w.Now(), w.Len())
	}
	mustVerify(t, w)
}

// snapshot captures the whole state of a wheel for "left unchanged" tests.
type snapshot struct {
	nodes    []node
	now      Tick
	length   int
	occupied [numLevels]uint64
}

func snap(w *Wheel) snapshot {
	return snapshot{slices.Clone(w.nodes), w.now, w.length, w.occupied}
}

func (s snapshot) equal(o snapshot) bool {
	return slices.Equal(s.nodes, o.nodes) && s.now == o.now && s.length == o.length && s.occupied == o.occupied
}

func TestBeyondMaxDelay(t *testing.T) {
	const now = 1_000_000
	w := New(4, now)
	if !w.Schedule(1, now+5) {
		t.Fatal("Schedule(1, now+5) refused")
	}
	before := snap(w)
	for _, d := range []Tick{now + MaxDelay + 1, now + MaxDelay + 1000, math.MaxUint64} {
		if w.Schedule(0, d) {
			t.Fatalf("Schedule(0, now+%d) accepted, beyond MaxDelay", d-now)
		}
		if w.Reschedule(0, d) || w.Reschedule(1, d) {
			t.Fatalf("Reschedule(_, now+%d) accepted, beyond MaxDelay", d-now)
		}
		if !snap(w).equal(before) {
			t.Fatalf("refused schedule at now+%d changed the wheel", d-now)
		}
	}
	if d, ok := w.Deadline(1); !ok || d != now+5 {
		t.Fatalf("Deadline(1) = %d, %v after refused Reschedule; want %d", d, ok, now+5)
	}
	if !w.Schedule(0, now+MaxDelay) {
		t.Fatal("Schedule at exactly now+MaxDelay refused")
	}
	if d, _ := w.Deadline(0); d != now+MaxDelay {
		t.Fatalf("Deadline(0) = %d, want %d", d, now+MaxDelay)
	}
	if h, ok := w.Expire(now + MaxDelay - 1); !ok || h != 1 {
		t.Fatalf("Expire = %d, %v; want 1", h, ok)
	}
	if h, ok := w.Expire(now + MaxDelay - 1); ok {
		t.Fatalf("handle %d fired one tick early", h)
	}
	if h, ok := w.Expire(now + MaxDelay); !ok || h != 0 {
		t.Fatalf("Expire(now+MaxDelay) = %d, %v; want 0", h, ok)
	}
	mustVerify(t, w)
}

func TestMove(t *testing.T) {
	w := New(5, 0)
	w.Move(0, 1) // from unscheduled: nothing happens
	if w.Scheduled(0) || w.Scheduled(1) || w.Len() != 0 {
		t.Fatal("Move of an unscheduled handle scheduled something")
	}
	// Three timers at one deadline; moving the middle one keeps its place.
	w.Schedule(0, 100)
	w.Schedule(2, 100)
	w.Schedule(3, 100)
	w.Move(2, 4)
	w.Move(4, 4) // onto itself: nothing happens
	if w.Scheduled(2) || !w.Scheduled(4) || w.Len() != 3 {
		t.Fatalf("after Move(2, 4): scheduled(2) %v scheduled(4) %v len %d", w.Scheduled(2), w.Scheduled(4), w.Len())
	}
	if d, ok := w.Deadline(4); !ok || d != 100 {
		t.Fatalf("Deadline(4) = %d, %v; want 100", d, ok)
	}
	mustVerify(t, w)
	if got, want := drain(w, 100), []Handle{0, 4, 3}; !slices.Equal(got, want) {
		t.Fatalf("expiry order %v, want %v", got, want)
	}
	mustVerify(t, w)
}

func TestCancelTwice(t *testing.T) {
	w := New(2, 7)
	if w.Cancel(0) {
		t.Fatal("Cancel of an unscheduled handle returned true")
	}
	w.Schedule(0, 9)
	w.Schedule(1, 9)
	if !w.Cancel(0) || w.Cancel(0) {
		t.Fatal("Cancel twice: want true then false")
	}
	if w.Len() != 1 || w.Scheduled(0) {
		t.Fatalf("after Cancel: len %d scheduled(0) %v", w.Len(), w.Scheduled(0))
	}
	mustVerify(t, w)
	if got := drain(w, 100); !slices.Equal(got, []Handle{1}) {
		t.Fatalf("fired %v, want [1]", got)
	}
}

func TestExpireBackwards(t *testing.T) {
	w := New(3, 1000)
	if _, ok := w.Expire(500); ok || w.Now() != 1000 {
		t.Fatalf("Expire(500) on an empty wheel: ok %v now %d", ok, w.Now())
	}
	w.Schedule(0, 1000) // at Now: due at the next Expire, whatever its argument
	w.Schedule(1, 1001)
	if h, ok := w.Expire(999); !ok || h != 0 {
		t.Fatalf("Expire(999) = %d, %v; want 0 (due at Now 1000)", h, ok)
	}
	if h, ok := w.Expire(999); ok {
		t.Fatalf("Expire(999) fired %d with deadline 1001", h)
	}
	if w.Now() != 1000 {
		t.Fatalf("Now %d after backwards Expire, want 1000", w.Now())
	}
	if h, ok := w.Expire(1001); !ok || h != 1 {
		t.Fatalf("Expire(1001) = %d, %v; want 1", h, ok)
	}
	mustVerify(t, w)
}

// TestPastDeadline: a deadline before Now joins the timers due at Now, in
// scheduling order, and Deadline still reports it exactly.
func TestPastDeadline(t *testing.T) {
	w := New(4, 0)
	w.Schedule(0, 100)
	w.Schedule(1, 100)
	if h, _ := w.Expire(100); h != 0 {
		t.Fatalf("first expiry %d, want 0", h)
	}
	w.Schedule(2, 50) // Now is 100 and 1 is still due at 100
	w.Schedule(3, 100)
	if d, _ := w.Deadline(2); d != 50 {
		t.Fatalf("Deadline(2) = %d, want 50", d)
	}
	mustVerify(t, w)
	if got, want := drain(w, 100), []Handle{1, 2, 3}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}

	// Further back than MaxDelay: recorded as Now-MaxDelay, due at once.
	const now = 1 << 40
	w = New(1, now)
	w.Schedule(0, 5)
	if d, _ := w.Deadline(0); d != now-MaxDelay {
		t.Fatalf("Deadline of a far past timer = %d, want Now-MaxDelay %d", d, now-MaxDelay)
	}
	if h, d, ok := w.ExpireDeadline(now); !ok || h != 0 || d != now-MaxDelay {
		t.Fatalf("ExpireDeadline = %d, %d, %v", h, d, ok)
	}
}

// TestWrap starts the wheel just before the uint32 deadline wraps (2^32,
// 2^33) and checks exact deadlines and exact firing ticks across the wrap,
// stepping one tick at a time, then a far timer across it.
func TestWrap(t *testing.T) {
	for _, start := range []Tick{1<<32 - 300, 1<<33 - 300, 1<<32 - 1, 1<<33 - 1<<30} {
		const n = 64
		w := New(n+1, start)
		for h := range Handle(n) {
			d := start + Tick(h)*11 // spans the wrap
			if !w.Schedule(h, d) {
				t.Fatalf("start %d: Schedule(%d, %d) refused", start, h, d)
			}
			if got, _ := w.Deadline(h); got != d {
				t.Fatalf("start %d: Deadline(%d) = %d, want %d", start, h, got, d)
			}
		}
		w.Schedule(n, start+MaxDelay)
		mustVerify(t, w)
		next := Handle(0)
		for now := start; now <= start+n*11; now++ {
			for {
				h, d, ok := w.ExpireDeadline(now)
				if !ok {
					break
				}
				if h != next || d != now || d != start+Tick(h)*11 {
					t.Fatalf("start %d: at tick %d fired %d (deadline %d), want %d", start, now, h, d, next)
				}
				next++
			}
		}
		if next != n {
			t.Fatalf("start %d: %d of %d timers fired", start, next, n)
		}
		mustVerify(t, w)
		if h, ok := w.Expire(start + MaxDelay - 1); ok {
			t.Fatalf("start %d: far timer %d fired early", start, h)
		}
		if h, d, ok := w.ExpireDeadline(start + MaxDelay + 1<<40); !ok || h != n || d != start+MaxDelay || w.Now() != d {
			t.Fatalf("start %d: far timer: %d, %d, %v, now %d", start, h, d, ok, w.Now())
		}
	}
}

// TestIdleJump: an hour of 1 ms ticks passes in a handful of jumps, not
// 3.6 million steps.
func TestIdleJump(t *testing.T) {
	const hour = 3_600_000
	start := Tick(1<<32 - 12345)
	w := New(2, start)
	if _, ok := w.Expire(start + hour); ok || w.jumps != 0 || w.Now() != start+hour {
		t.Fatalf("empty wheel: jumps %d now %d", w.jumps, w.Now())
	}
	now := w.Now()
	w.Schedule(0, now+hour)
	w.Schedule(1, now+hour+1)
	if h, ok := w.Expire(now + hour - 1); ok {
		t.Fatalf("%d fired early", h)
	}
	if h, ok := w.Expire(now + 2*hour); !ok || h != 0 || w.Now() != now+hour {
		t.Fatalf("Expire = %d, %v at now %d", h, ok, w.Now())
	}
	if h, ok := w.Expire(now + 2*hour); !ok || h != 1 {
		t.Fatalf("Expire = %d, %v", h, ok)
	}
	if w.jumps > 2*numLevels {
		t.Fatalf("%d jumps over an hour, want at most %d (one per level per timer)", w.jumps, 2*numLevels)
	}
}

// TestFIFOAcrossCascade: timers with one deadline fire in scheduling order
// even when the first were scheduled far ahead (high level) and the last
// just before (level 0).
func TestFIFOAcrossCascade(t *testing.T) {
	const deadline = 3<<24 + 5<<18 + 7<<12 + 9<<6 + 11
	w := New(8, 0)
	steps := []Tick{0, 2 << 24, 3<<24 + 1, 3<<24 + 5<<18 + 3, 3<<24 + 5<<18 + 7<<12 + 1, deadline - 60, deadline - 2, deadline - 1}
	for i, now := range steps {
		if h, ok := w.Expire(now); ok {
			t.Fatalf("handle %d fired at %d before its deadline %d", h, now, deadline)
		}
		w.Schedule(Handle(i), deadline)
		mustVerify(t, w)
	}
	want := []Handle{0, 1, 2, 3, 4, 5, 6, 7}
	if got := drain(w, deadline); !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

func TestAdvance(t *testing.T) {
	w := New(4, 10)
	w.Schedule(0, 20)
	w.Schedule(1, 15)
	w.Schedule(2, 30)
	var got []Handle
	n := w.Advance(25, func(h Handle) {
		got = append(got, h)
		if h == 1 {
			w.Schedule(3, 12) // in the past: fires in this call
		}
	})
	if want := []Handle{1, 3, 0}; n != 3 || !slices.Equal(got, want) {
		t.Fatalf("Advance fired %d: %v, want %v", n, got, want)
	}
	if w.Len() != 1 || w.Now() != 25 {
		t.Fatalf("len %d now %d", w.Len(), w.Now())
	}
}

// TestMisuse: handle misuse panics with a clear message under -tags
// invariants; in release builds an out-of-range handle still panics (bounds
// check) and the other misuses leave a consistent wheel.
func TestMisuse(t *testing.T) {
	w := New(2, 0)
	mustPanic(t, "out of range", func() { w.Schedule(2, 1) })
	mustPanic(t, "out of range", func() { w.Cancel(100) })
	mustPanic(t, "out of range", func() { w.Scheduled(2) })
	w.Schedule(0, 5)
	w.Schedule(1, 6)
	if invariants.Enabled {
		mustPanic(t, "already scheduled", func() { w.Schedule(0, 7) })
		mustPanic(t, "which is scheduled", func() { w.Move(0, 1) })
		return
	}
	w.Schedule(0, 7) // acts as Reschedule
	if d, _ := w.Deadline(0); d != 7 || w.Len() != 2 {
		t.Fatalf("release Schedule of a scheduled handle: deadline %d len %d", d, w.Len())
	}
	w.Move(0, 1) // cancels 1's timer, then moves
	if d, _ := w.Deadline(1); d != 7 || w.Len() != 1 || w.Scheduled(0) {
		t.Fatalf("release Move onto a scheduled handle: deadline %d len %d", d, w.Len())
	}
	mustVerify(t, w)
}

// TestVerifyFails shows the checker can fail: each corruption must be
// reported.
func TestVerifyFails(t *testing.T) {
	build := func() *Wheel {
		w := New(4, 100)
		w.Schedule(0, 101)
		w.Schedule(1, 5000)
		w.Schedule(2, 5000)
		return w
	}
	corrupt := map[string]func(w *Wheel){
		"bitmap":     func(w *Wheel) { w.occupied[3] |= 1 << 9 },
		"lost bit":   func(w *Wheel) { w.occupied[0] = 0 },
		"deadline":   func(w *Wheel) { w.nodes[1].deadline += 1 << 12 },
		"prev link":  func(w *Wheel) { w.nodes[2].prev = 0 },
		"length":     func(w *Wheel) { w.length++ },
		"stray node": func(w *Wheel) { w.nodes[3].prev, w.nodes[3].next = 3, 3 },
		"half":       func(w *Wheel) { w.nodes[3].prev = 0 },
	}
	for name, f := range corrupt {
		w := build()
		mustVerify(t, w)
		f(w)
		if w.verify() == nil {
			t.Errorf("%s: corruption not detected", name)
		}
	}
}

// TestLargeWheelInvariants runs operations on a wheel larger than
// fullCheckNodes, where the debug check is amortized.
func TestLargeWheelInvariants(t *testing.T) {
	const capacity = 3 * fullCheckNodes
	w := New(capacity, 0)
	for h := range Handle(capacity) {
		w.Schedule(h, Tick(h)*37%100_000)
	}
	mustVerify(t, w)
	prev, n := Tick(0), 0
	for {
		h, d, ok := w.ExpireDeadline(100_000)
		if !ok {
			break
		}
		if d < prev || d != Tick(h)*37%100_000 {
			t.Fatalf("handle %d deadline %d after %d", h, d, prev)
		}
		prev = d
		n++
	}
	if n != capacity {
		t.Fatalf("%d of %d fired", n, capacity)
	}
	mustVerify(t, w)
}

func TestZeroAllocs(t *testing.T) {
	const capacity, live = 1024, 512
	w := New(capacity, 0)
	for h := range Handle(live) {
		w.Schedule(h, 1+Tick(h)*97%5000)
	}
	now, next := Tick(0), Handle(live)
	spare := func() Handle { // a handle outside the live ones
		h := next
		next++
		if next == capacity {
			next = live
		}
		return h
	}
	if a := testing.AllocsPerRun(1000, func() {
		h := spare()
		w.Schedule(h, now+300)
		w.Reschedule(h, now+7000)
		to := spare()
		w.Move(h, to)
		w.Cancel(to)
	}); a != 0 {
		t.Errorf("Schedule/Reschedule/Move/Cancel: %v allocs per run", a)
	}
	if a := testing.AllocsPerRun(1000, func() {
		now += 5
		for {
			h, ok := w.Expire(now)
			if !ok {
				break
			}
			w.Schedule(h, now+1+Tick(h)*97%5000)
		}
	}); a != 0 {
		t.Errorf("Expire: %v allocs per run", a)
	}
	if w.Len() != live {
		t.Fatalf("len %d, want %d", w.Len(), live)
	}
}
