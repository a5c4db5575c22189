package offsets

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// model is the plain reference the tracker is compared against: the
// generation's emitted records from the commit point on, as a list in
// offset order, and the set of those done. A record leaves both once no
// record below it is left undone, so the list's first record is the commit
// point and the gauges are lengths.
type model struct {
	limit     int
	assigned  bool
	next      int64          // lowest offset the next emit may have
	emitted   []int64        // from the commit point on
	done      map[int64]bool // of emitted, those done
	committed int64
}

func newModel(limit int) *model { return &model{limit: limit, committed: -1} }

// committable is the offset of the lowest record not done, else next.
func (m *model) committable() int64 {
	if len(m.emitted) == 0 {
		return m.next
	}
	return m.emitted[0]
}

func (m *model) uncommitted() int { return len(m.emitted) }

func (m *model) pending() int { return len(m.emitted) - len(m.done) }

func (m *model) assign(start int64) {
	m.assigned, m.next, m.emitted, m.done = true, start, nil, map[int64]bool{}
}

func (m *model) revoke() { m.assigned, m.emitted, m.done = false, nil, nil }

func (m *model) emit(off int64) error {
	switch {
	case !m.assigned:
		return errNotAssigned
	case off < m.next:
		return errOrder
	case m.uncommitted() >= m.limit:
		return ErrFull
	}
	m.emitted = append(m.emitted, off)
	m.next = off + 1
	return nil
}

// markDone marks the record at off of the current generation done;
// current says whether the caller's mark is of the current generation.
func (m *model) markDone(off int64, current bool) error {
	if !current || !m.assigned {
		return ErrStale
	}
	if m.done[off] || !slices.Contains(m.emitted, off) {
		// Every mark the driver passes was emitted in this generation:
		// one that is not in emitted was done and passed.
		return errDuplicate
	}
	m.done[off] = true
	for len(m.emitted) > 0 && m.done[m.emitted[0]] {
		delete(m.done, m.emitted[0])
		m.emitted = m.emitted[1:]
	}
	return nil
}

// nextCommit offers the commit point while assigned and above what was
// committed.
func (m *model) nextCommit() (int64, bool) {
	c := m.committable()
	if m.assigned && c > m.committed {
		return c, true
	}
	return m.committed, false
}

// commitDone raises committed to off, if off is above it.
func (m *model) commitDone(off int64) bool {
	raised := off > m.committed
	m.committed = max(m.committed, off)
	return raised
}

// choices is the differential driver's source of decisions: a byte
// string, random in TestDifferential and the fuzzer's in FuzzTracker. A
// choice below 256 spends one byte, a larger one two (the driver's stay
// below 65536); zeros once the bytes run out.
type choices struct{ data []byte }

func (c *choices) more() bool { return len(c.data) > 0 }

// pick returns a value in [0, n), n > 0.
func (c *choices) pick(n int) int {
	v := 0
	for k := 0; k < 2 && (k == 0 || n > 256); k++ {
		v <<= 8
		if len(c.data) > 0 {
			v |= int(c.data[0])
			c.data = c.data[1:]
		}
	}
	return v % n
}

// differential drives a tracker and a model with the same operations and
// fails at the first difference. It keeps the Marks the tracker handed
// out: pending and done ones of the current generation, and stale ones.
type differential struct {
	tb    testing.TB
	t     *Tracker
	m     *model
	c     *choices
	op    int
	gen   uint64
	live  []Mark // pending, current generation
	done  []Mark // done, current generation (a bounded sample)
	stale []Mark // from earlier generations (a bounded sample)
	sent  []int64
	fill  bool // this generation leans towards emits
}

// keep bounds the samples of done and stale marks the driver keeps.
const keep = 64

func (d *differential) fatalf(format string, args ...any) {
	d.tb.Helper()
	d.tb.Fatalf("op %d (gen %d, next %d, %d records): %s", d.op, d.gen, d.m.next, len(d.m.emitted), fmt.Sprintf(format, args...))
}

// offset draws an emit offset relative to the model's next: mostly the
// next one, then small and large gaps, sometimes one already used.
func (d *differential) offset() int64 {
	next := d.m.next
	switch d.c.pick(16) {
	case 0, 1, 2, 3, 4, 5, 6, 7, 8:
		return next
	case 9, 10:
		return next + 1 + int64(d.c.pick(3))
	case 11:
		return next + int64(d.c.pick(1<<16))
	case 12:
		if d.c.pick(4) == 0 {
			return next + 1<<40 // a partition whose records jump far ahead
		}
		return next + 1 + int64(d.c.pick(1<<10))
	case 13:
		return next - 1 - int64(d.c.pick(4)) // out of order
	default:
		return next
	}
}

func sameErr(got, want error) bool {
	if want == nil {
		return got == nil
	}
	return errors.Is(got, want)
}

func (d *differential) removeAt(s []Mark, i int) []Mark {
	s[i] = s[len(s)-1]
	return s[:len(s)-1]
}

func (d *differential) sample(s []Mark, m Mark) []Mark {
	if len(s) < keep {
		return append(s, m)
	}
	s[d.c.pick(keep)] = m
	return s
}

func (d *differential) endGeneration() {
	for _, m := range d.live {
		d.stale = d.sample(d.stale, m)
	}
	for _, m := range d.done {
		d.stale = d.sample(d.stale, m)
	}
	d.live, d.done = d.live[:0], d.done[:0]
}

// opKind draws the next operation. Generations end rarely (one op in 512),
// so the window fills up to the limit; each generation leans towards emits
// or towards dones (d.fill), so both full and draining windows are seen.
func (d *differential) opKind() int {
	const (
		emit = iota
		done
		duplicate
		stale
		commit
		assign
		revoke
	)
	c := d.c
	op := c.pick(64)
	switch {
	case op == 63:
		if c.pick(8) > 0 {
			return commit
		}
		if c.pick(4) == 0 {
			return revoke
		}
		return assign
	case op < 24:
		return emit
	case op < 40:
		if d.fill {
			return emit
		}
		return done
	case op < 50:
		return done
	case op < 53:
		return duplicate
	case op < 56:
		return stale
	default:
		return commit
	}
}

func (d *differential) step() {
	d.tb.Helper()
	t, m, c := d.t, d.m, d.c
	switch d.opKind() {
	case 0: // emit
		off := d.offset()
		mk, err := t.Emit(off)
		if werr := m.emit(off); !sameErr(err, werr) {
			d.fatalf("Emit(%d) = %v, model %v", off, err, werr)
		}
		if err == nil {
			if mk.Offset != off {
				d.fatalf("Emit(%d) returned a mark of offset %d", off, mk.Offset)
			}
			d.live = append(d.live, mk)
		}
	case 1: // done
		if len(d.live) == 0 {
			return
		}
		// Mostly a random pending record; sometimes the oldest, which
		// moves the commit point.
		i := c.pick(len(d.live))
		if c.pick(4) == 0 {
			i = 0
			for j := range d.live {
				if d.live[j].Offset < d.live[i].Offset {
					i = j
				}
			}
		}
		mk := d.live[i]
		err := t.Done(mk)
		if werr := m.markDone(mk.Offset, true); !sameErr(err, werr) {
			d.fatalf("Done(offset %d) = %v, model %v", mk.Offset, err, werr)
		}
		d.live = d.removeAt(d.live, i)
		d.done = d.sample(d.done, mk)
	case 2: // duplicate
		if len(d.done) == 0 {
			return
		}
		mk := d.done[c.pick(len(d.done))]
		if err, werr := t.Done(mk), m.markDone(mk.Offset, true); !sameErr(err, werr) || err == nil {
			d.fatalf("second Done(offset %d) = %v, model %v", mk.Offset, err, werr)
		}
	case 3: // stale
		mk := Mark{}
		if len(d.stale) > 0 {
			mk = d.stale[c.pick(len(d.stale))]
		}
		if err, werr := t.Done(mk), m.markDone(mk.Offset, false); !sameErr(err, werr) {
			d.fatalf("stale Done(offset %d) = %v, model %v", mk.Offset, err, werr)
		}
	case 4: // commit
		off, ok := t.NextCommit()
		woff, wok := m.nextCommit()
		if off != woff || ok != wok {
			d.fatalf("NextCommit = %d, %v; model %d, %v", off, ok, woff, wok)
		}
		if ok {
			d.sent = append(d.sent, off)
		}
		// The broker replies to a commit sent earlier: in order mostly,
		// sometimes a late reply to an older one (franz-go#689).
		if len(d.sent) > 0 && c.pick(3) > 0 {
			i := len(d.sent) - 1
			if c.pick(4) == 0 {
				i = c.pick(len(d.sent))
			}
			off := d.sent[i]
			if got, want := t.Committed(off), m.commitDone(off); got != want {
				d.fatalf("Committed(%d) = %v, model %v", off, got, want)
			}
			if len(d.sent) > keep {
				d.sent = d.sent[len(d.sent)-keep:]
			}
		}
	case 5: // assign
		// A rebalance or a seek: behind, at or ahead of where we are.
		start := max(0, m.next+int64(c.pick(200))-100)
		if c.pick(8) == 0 {
			start = m.committed + int64(c.pick(3))
		}
		d.endGeneration()
		gen := t.Assign(start)
		m.assign(start)
		if gen <= d.gen || gen != t.Generation() {
			d.fatalf("Assign(%d) = generation %d after %d (Generation %d)", start, gen, d.gen, t.Generation())
		}
		d.gen = gen
		d.fill = c.pick(2) == 0
	default: // revoke
		d.endGeneration()
		t.Revoke()
		m.revoke()
		if t.Generation() != 0 {
			d.fatalf("Revoke left generation %d", t.Generation())
		}
		if _, err := t.Emit(m.next); !errors.Is(err, errNotAssigned) {
			d.fatalf("Emit after Revoke = %v, want errNotAssigned", err)
		}
	}
	d.compare()
}

// compare checks every gauge against the model and the safety property:
// the offset NextCommit offers is never above a record not yet done.
func (d *differential) compare() {
	d.tb.Helper()
	t, m := d.t, d.m
	if m.assigned {
		if got, want := t.Committable(), m.committable(); got != want {
			d.fatalf("Committable = %d, model %d", got, want)
		}
	}
	if got, want := t.Uncommitted(), m.uncommitted(); got != want {
		d.fatalf("Uncommitted = %d, model %d", got, want)
	}
	if got, want := t.Pending(), m.pending(); got != want {
		d.fatalf("Pending = %d, model %d", got, want)
	}
	if got, want := t.Full(), m.uncommitted() >= m.limit; got != want {
		d.fatalf("Full = %v, model %v", got, want)
	}
	if off, ok := t.NextCommit(); ok {
		for _, e := range m.emitted {
			if !m.done[e] && e < off {
				d.fatalf("NextCommit offers %d past offset %d, not done", off, e)
			}
		}
	}
	if st := t.Stats(); st.Committed != m.committed || st.Pending != m.pending() || st.Emitted-st.Done-st.Dropped != uint64(st.Pending) {
		d.fatalf("Stats %+v; model committed %d, pending %d", st, m.committed, m.pending())
	}
}

// runDifferential runs ops from c until it runs out, checking the
// tracker's invariants every checkEvery ops and at the end.
func runDifferential(tb testing.TB, limit int, c *choices, checkEvery int) {
	tb.Helper()
	d := &differential{tb: tb, t: New(limit), m: newModel(limit), c: c}
	if c.pick(4) > 0 {
		start := int64(c.pick(1000))
		d.gen = d.t.Assign(start)
		d.m.assign(start)
	}
	for ; c.more(); d.op++ {
		d.step()
		if d.op%checkEvery == 0 {
			d.t.check()
		}
	}
	d.t.check()
	// Drain: every pending record done, in the generation's order
	// reversed, and the commit point reaches next.
	if d.m.assigned {
		slices.SortFunc(d.live, func(a, b Mark) int { return cmp.Compare(b.Offset, a.Offset) })
		for _, mk := range d.live {
			if err := d.t.Done(mk); err != nil {
				d.fatalf("drain Done(offset %d) = %v", mk.Offset, err)
			}
			if err := d.m.markDone(mk.Offset, true); err != nil {
				d.fatalf("model drain: %v", err)
			}
			d.compare()
		}
		d.live = d.live[:0]
		if got := d.t.Committable(); got != d.m.next || d.t.Uncommitted() != 0 {
			d.fatalf("drained: Committable %d, want %d; Uncommitted %d", got, d.m.next, d.t.Uncommitted())
		}
		d.t.check()
	}
}

// bytesPerOp is about what one op of the driver spends.
const bytesPerOp = 3

func TestDifferential(t *testing.T) {
	ops := 40000
	if testing.Short() {
		ops = 5000
	}
	// Limits below, at and above one word, and one whose ring is larger
	// than the limit (100 -> 128 bits).
	for _, limit := range []int{1, 3, 64, 100, 1000} {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("limit=%d/seed=%d", limit, seed), func(t *testing.T) {
				data := make([]byte, bytesPerOp*ops)
				rand.NewChaCha8([32]byte{byte(seed), byte(limit), byte(limit >> 8)}).Read(data)
				runDifferential(t, limit, &choices{data: data}, 64)
			})
		}
	}
}

func FuzzTracker(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{5, 2, 0, 0, 0, 0, 0, 0, 14, 0, 0, 20, 0, 26, 1, 27, 2, 30, 6, 14})
	f.Add([]byte{63, 1, 0, 0, 0, 12, 0, 0, 0, 0, 0, 12, 0, 14, 1, 14, 0, 22, 24, 26, 31, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 {
			return
		}
		limit := 1 + int(data[0]%130)
		runDifferential(t, limit, &choices{data: data[1:]}, 1)
	})
}
