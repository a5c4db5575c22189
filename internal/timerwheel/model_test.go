package timerwheel

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// model is the plain reference the wheel is compared against: a slice of
// pending timers sorted by (key, seq), where key is the deadline raised to
// the model's now at scheduling time and seq counts schedules.
type model struct {
	now Tick
	seq uint64
	q   []modelTimer
}

type modelTimer struct {
	h        Handle
	key      Tick // max(deadline, now when scheduled): the expiry order
	seq      uint64
	deadline Tick // as Deadline reports it
}

func (m *model) find(h Handle) int {
	for i := range m.q {
		if m.q[i].h == h {
			return i
		}
	}
	return -1
}

func (m *model) remove(i int) modelTimer {
	e := m.q[i]
	m.q = append(m.q[:i], m.q[i+1:]...)
	return e
}

func (m *model) schedule(h Handle, d Tick) bool {
	if d > m.now && d-m.now > MaxDelay {
		return false
	}
	if i := m.find(h); i >= 0 {
		m.remove(i)
	}
	rec := d
	if d < m.now && m.now-d > MaxDelay {
		rec = m.now - MaxDelay
	}
	m.seq++
	e := modelTimer{h: h, key: max(d, m.now), seq: m.seq, deadline: rec}
	i := len(m.q)
	for i > 0 && m.q[i-1].key > e.key { // seq is the largest so far
		i--
	}
	m.q = append(m.q, modelTimer{})
	copy(m.q[i+1:], m.q[i:])
	m.q[i] = e
	return true
}

func (m *model) cancel(h Handle) bool {
	if i := m.find(h); i >= 0 {
		m.remove(i)
		return true
	}
	return false
}

func (m *model) move(from, to Handle) {
	if i := m.find(from); i >= 0 && from != to {
		m.q[i].h = to
	}
}

func (m *model) expire(now Tick) (modelTimer, bool) {
	now = max(now, m.now)
	if len(m.q) > 0 && m.q[0].key <= now {
		e := m.remove(0)
		m.now = e.key
		return e, true
	}
	m.now = now
	return modelTimer{}, false
}

// source feeds the differential driver: random numbers in TestDifferential,
// fuzz bytes in FuzzWheel.
type source interface {
	more() bool
	// n returns a value in [0, bound), bound > 0.
	n(bound uint64) uint64
}

type randSource struct {
	r    *rand.Rand
	left int
}

func (s *randSource) more() bool { s.left--; return s.left >= 0 }

func (s *randSource) n(bound uint64) uint64 { return s.r.Uint64N(bound) }

// byteSource reads a choice from one byte when bound fits a byte, else a
// value from eight (zero padded at the end of the data).
type byteSource struct{ b []byte }

func (s *byteSource) more() bool { return len(s.b) > 0 }

func (s *byteSource) n(bound uint64) uint64 {
	if bound <= 256 {
		if len(s.b) == 0 {
			return 0
		}
		v := s.b[0]
		s.b = s.b[1:]
		return uint64(v) % bound
	}
	var buf [8]byte
	k := copy(buf[:], s.b)
	s.b = s.b[k:]
	return binary.LittleEndian.Uint64(buf[:]) % bound
}

// differential drives a wheel and a model with the same operations and
// fails at the first difference.
type differential struct {
	tb testing.TB
	w  *Wheel
	m  *model
	s  source
	op int
}

// deadline draws a deadline relative to the model's now, biased towards the
// cases that break wheels: the current tick, the recent and far past,
// exactly MaxDelay and just past it, level boundaries, and deadlines that
// equal a pending timer's (FIFO).
func (d *differential) deadline() Tick {
	now, s := d.m.now, d.s
	switch s.n(11) {
	case 0:
		return now + s.n(130)
	case 1:
		return now - min(now, s.n(130))
	case 2:
		return now + MaxDelay
	case 3:
		return now + MaxDelay + 1 + s.n(1000)
	case 4:
		return now + s.n(uint64(MaxDelay)+1)
	case 5:
		unit := Tick(1) << (slotBits * (1 + s.n(numLevels)))
		b := (now/unit + 1 + s.n(2)) * unit
		return b + s.n(3) - 1
	case 6:
		return now - min(now, MaxDelay+s.n(1<<33))
	case 7, 8:
		if len(d.m.q) > 0 {
			e := d.m.q[s.n(uint64(len(d.m.q)))]
			return e.key + s.n(2)
		}
		return now + s.n(64)
	case 9:
		return now + s.n(1<<12)
	default:
		return now + s.n(1<<20)
	}
}

// target draws an Expire argument relative to the model's now.
func (d *differential) target() Tick {
	now, s := d.m.now, d.s
	switch s.n(10) {
	case 0:
		return now
	case 1:
		return now + 1
	case 2:
		return now + s.n(64)
	case 3:
		return now + s.n(1<<12)
	case 4:
		return now + s.n(1<<24)
	case 5:
		return now + s.n(1<<31)
	case 6:
		return now + 1<<34 // past every pending deadline
	case 7:
		return now - min(now, s.n(100)) // backwards: counts as now
	case 8:
		if len(d.m.q) > 0 {
			return d.m.q[0].key - s.n(2) // exactly at, or one before, the next deadline
		}
		return now + s.n(1<<16)
	default:
		unit := Tick(1) << (slotBits * (1 + s.n(numLevels)))
		return (now/unit+1)*unit + s.n(3) - 1
	}
}

func (d *differential) handle() Handle {
	return Handle(d.s.n(uint64(d.w.Capacity())))
}

// unscheduled returns an unscheduled handle, scanning from a random one, or
// false if every handle is scheduled.
func (d *differential) unscheduled() (Handle, bool) {
	c := d.w.Capacity()
	h := int(d.s.n(uint64(c)))
	for range c {
		if d.m.find(Handle(h)) < 0 {
			return Handle(h), true
		}
		h = (h + 1) % c
	}
	return 0, false
}

func (d *differential) fatalf(format string, args ...any) {
	d.tb.Helper()
	d.tb.Fatalf("op %d (now %d, len %d): %s", d.op, d.m.now, len(d.m.q), fmt.Sprintf(format, args...))
}

func (d *differential) expireOnce(t Tick) bool {
	d.tb.Helper()
	var gh Handle
	var gd Tick
	var gok bool
	if d.op%2 == 0 {
		gh, gd, gok = d.w.ExpireDeadline(t)
	} else {
		gh, gok = d.w.Expire(t)
	}
	e, ok := d.m.expire(t)
	if gok != ok || (ok && gh != e.h) {
		d.fatalf("Expire(%d) = %d, %v; model %d, %v (model deadline %d)", t, gh, gok, e.h, ok, e.deadline)
	}
	if ok && d.op%2 == 0 && gd != e.deadline {
		d.fatalf("ExpireDeadline(%d) deadline %d, model %d", t, gd, e.deadline)
	}
	if d.w.Scheduled(gh) && ok {
		d.fatalf("expired handle %d still scheduled", gh)
	}
	return ok
}

func (d *differential) step() {
	d.tb.Helper()
	w, m, s := d.w, d.m, d.s
	switch s.n(20) {
	case 0, 1, 2, 3, 4:
		h, ok := d.unscheduled()
		if !ok {
			return
		}
		dl := d.deadline()
		if got, want := w.Schedule(h, dl), m.schedule(h, dl); got != want {
			d.fatalf("Schedule(%d, %d) = %v, model %v", h, dl, got, want)
		}
	case 5, 6, 7:
		h, dl := d.handle(), d.deadline()
		if got, want := w.Reschedule(h, dl), m.schedule(h, dl); got != want {
			d.fatalf("Reschedule(%d, %d) = %v, model %v", h, dl, got, want)
		}
	case 8, 9:
		h := d.handle()
		if got, want := w.Cancel(h), m.cancel(h); got != want {
			d.fatalf("Cancel(%d) = %v, model %v", h, got, want)
		}
	case 10, 11:
		from := d.handle()
		to, ok := d.unscheduled()
		if s.n(8) == 0 {
			to, ok = from, true
		}
		if !ok {
			return
		}
		w.Move(from, to)
		m.move(from, to)
	case 12, 13, 14, 15, 16:
		d.expireOnce(d.target())
	case 17:
		t := d.target()
		for i := 0; d.expireOnce(t); i++ {
			if i > w.Capacity() {
				d.fatalf("Expire(%d) returned more timers than the capacity", t)
			}
		}
	default:
		d.compareAll()
	}
	if w.Len() != len(m.q) || w.Now() != m.now {
		d.fatalf("Len %d Now %d; model %d %d", w.Len(), w.Now(), len(m.q), m.now)
	}
}

// compareAll checks every handle's Scheduled and Deadline and runs the
// wheel's invariant checker.
func (d *differential) compareAll() {
	d.tb.Helper()
	if err := d.w.verify(); err != nil {
		d.fatalf("%v", err)
	}
	for h := range Handle(d.w.Capacity()) {
		dl, ok := d.w.Deadline(h)
		i := d.m.find(h)
		if ok != (i >= 0) || d.w.Scheduled(h) != ok {
			d.fatalf("handle %d scheduled %v, model %v", h, ok, i >= 0)
		}
		if ok && dl != d.m.q[i].deadline {
			d.fatalf("handle %d Deadline %d, model %d", h, dl, d.m.q[i].deadline)
		}
	}
}

// runDifferential runs ops from s until it runs out, then drains both
// sides, comparing every result.
func runDifferential(tb testing.TB, capacity int, start Tick, s source) {
	tb.Helper()
	d := &differential{tb: tb, w: New(capacity, start), m: &model{now: start}, s: s}
	for ; s.more(); d.op++ {
		d.step()
	}
	d.compareAll()
	for d.expireOnce(d.m.now + 2*MaxDelay) {
		d.op++
	}
	if d.w.Len() != 0 {
		d.fatalf("drained wheel has Len %d", d.w.Len())
	}
	d.compareAll()
}

// startTicks are the wheel start times the differential tests use: zero,
// just before the uint32 deadline wraps (2^32 and 2^33), just before a top
// level revolution, and an arbitrary large tick.
var startTicks = []Tick{0, 1<<32 - 3000, 1<<33 - 70, 1<<30 - 5, 1<<32 - 1<<29, 0x5a5a_5a5a_5a5a}

func TestDifferential(t *testing.T) {
	ops := 20000
	if testing.Short() {
		ops = 3000
	}
	for _, capacity := range []int{1, 2, 5, 16, 64} {
		for i, start := range startTicks {
			t.Run(fmt.Sprintf("cap=%d/start=%d", capacity, start), func(t *testing.T) {
				seed := uint64(capacity)<<8 | uint64(i)
				s := &randSource{r: rand.New(rand.NewPCG(seed, 0x7469_6d65_7277_6865)), left: ops}
				runDifferential(t, capacity, start, s)
			})
		}
	}
}

func FuzzWheel(f *testing.F) {
	f.Add([]byte{3, 0, 0, 0, 0, 12, 0, 12, 1, 12, 6})
	f.Add([]byte{7, 1, 0, 2, 0, 2, 0, 5, 2, 12, 3, 10, 17, 6})
	f.Add([]byte{1, 2, 0, 2, 12, 6, 0, 7, 12, 1, 17, 4})
	f.Add([]byte{16, 3, 0, 5, 0, 5, 0, 5, 0, 5, 10, 1, 12, 9, 2, 17, 6, 19})
	f.Add([]byte{31, 4, 5, 3, 5, 6, 8, 1, 11, 0, 12, 5, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 17, 6})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		capacity := 1 + int(data[0]%32)
		start := startTicks[int(data[1])%len(startTicks)]
		runDifferential(t, capacity, start, &byteSource{b: data[2:]})
	})
}
