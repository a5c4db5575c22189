package offsets

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/xorack/xorack/internal/race"
)

// doneModel is the plain model of a partition for the done set: the
// offsets emitted in this generation, in order, and which are done.
type doneModel struct {
	offs []int64
	done map[int64]bool
	next int64
}

// floor is the lowest offset not done, or next.
func (m *doneModel) floor() int64 {
	for _, o := range m.offs {
		if !m.done[o] {
			return o
		}
	}
	return m.next
}

// set returns the done set as the contract defines it: offsets above the
// floor that are not emitted-and-pending, up to the highest such below the
// last emitted, as a membership function and the span.
func (m *doneModel) set() (map[int64]bool, int64) {
	f := m.floor()
	pending := map[int64]bool{}
	for _, o := range m.offs {
		if !m.done[o] {
			pending[o] = true
		}
	}
	in := map[int64]bool{}
	var top int64 = -1
	for o := f; o < m.next; o++ {
		if !pending[o] {
			in[o] = true
			top = o
		}
	}
	if top < 0 {
		return in, 0
	}
	return in, top + 1 - f
}

// runDoneDifferential drives a tracker and the model with the same random
// operations, and after each checks AppendDone against the model at a
// budget chosen from c: the text within budget, the floor, and the decoded
// set equal to the model's over the span it covers; complete exactly when
// it covers the model's whole span.
func runDoneDifferential(tb testing.TB, c *choices) {
	limit := 1 + c.pick(300)
	tr := New(limit)
	start := int64(c.pick(1000))
	tr.Assign(start)
	m := &doneModel{done: map[int64]bool{}, next: start}
	var marks []Mark
	var buf []byte
	for op := 0; c.more(); op++ {
		switch k := c.pick(8); {
		case k < 4 && !tr.Full():
			gap := int64(0)
			if c.pick(6) == 0 {
				gap = int64(1 + c.pick(40))
			}
			off := m.next + gap
			mk, err := tr.Emit(off)
			if err != nil {
				tb.Fatalf("op %d: Emit(%d): %v", op, off, err)
			}
			marks = append(marks, mk)
			m.offs = append(m.offs, off)
			m.next = off + 1
		case k < 7 && len(marks) > 0:
			i := c.pick(len(marks))
			mk := marks[i]
			marks[i] = marks[len(marks)-1]
			marks = marks[:len(marks)-1]
			if err := tr.Done(mk); err != nil {
				tb.Fatalf("op %d: Done(%d): %v", op, mk.Offset, err)
			}
			m.done[mk.Offset] = true
		default:
			if off, ok := tr.NextCommit(); ok {
				tr.Committed(off)
			}
		}
		budget := MinDoneBudget + c.pick(200)
		if c.pick(4) == 0 {
			budget = 4096
		}
		var complete bool
		buf, complete = tr.AppendDone(buf[:0], budget)
		if len(buf) > budget {
			tb.Fatalf("op %d: done set of %d bytes over budget %d", op, len(buf), budget)
		}
		want, span := m.set()
		d, err := ParseDone(string(buf))
		if err != nil {
			tb.Fatalf("op %d: ParseDone(%q): %v", op, buf, err)
		}
		if len(buf) == 0 {
			if complete != (span == 0) {
				tb.Fatalf("op %d: empty text, complete %v, model span %d", op, complete, span)
			}
			continue
		}
		if d.Floor != tr.Committable() || d.Floor != m.floor() {
			tb.Fatalf("op %d: floor %d, committable %d, model %d", op, d.Floor, tr.Committable(), m.floor())
		}
		if d.Span > span || complete != (d.Span == span) {
			tb.Fatalf("op %d: span %d of model's %d, complete %v", op, d.Span, span, complete)
		}
		for o := d.Floor; o < d.Floor+d.Span; o++ {
			if d.Contains(o) != want[o] {
				tb.Fatalf("op %d: offset %d: decoded done %v, model %v (floor %d, text %q)", op, o, d.Contains(o), want[o], d.Floor, buf)
			}
		}
		if d.Contains(d.Floor-1) || d.Contains(d.Floor+d.Span) {
			tb.Fatalf("op %d: set reaches outside [%d, %d)", op, d.Floor, d.Floor+d.Span)
		}
	}
}

func TestDoneSetMatchesModel(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 60
	}
	for seed := range n {
		rng := rand.New(rand.NewPCG(uint64(seed), 19))
		data := make([]byte, 200+rng.IntN(1500))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		runDoneDifferential(t, &choices{data: data})
	}
}

// TestDoneSetPicksTheSmallerBody: few long stretches take runs; many
// short ones take the bitset; both within the budget and decoding to the
// same set.
func TestDoneSetPicksTheSmallerBody(t *testing.T) {
	for _, tc := range []struct {
		name  string
		every int // every k-th record stays pending
		kind  byte
	}{{"long stretches", 1000, doneKindRuns}, {"alternating", 2, doneKindBits}} {
		tr := New(10_000)
		tr.Assign(0)
		var pend []Mark
		for i := range 10_000 {
			m, err := tr.Emit(int64(i))
			if err != nil {
				t.Fatal(err)
			}
			if i%tc.every == 0 {
				pend = append(pend, m)
			} else if err := tr.Done(m); err != nil {
				t.Fatal(err)
			}
		}
		text, complete := tr.AppendDone(nil, 4096)
		if !complete {
			t.Fatalf("%s: 10,000 records did not fit 4096 bytes (%d)", tc.name, len(text))
		}
		d, err := ParseDone(string(text))
		if err != nil {
			t.Fatal(err)
		}
		blob := mustBlob(t, string(text))
		if blob[offKind] != tc.kind {
			t.Errorf("%s: kind %d, want %d (%d bytes)", tc.name, blob[offKind], tc.kind, len(text))
		}
		if got, want := d.Len(), int64(10_000-len(pend)); got != want {
			t.Errorf("%s: %d offsets done, want %d", tc.name, got, want)
		}
	}
}

// TestDoneSetOverBudget: a set that does not fit covers a prefix within
// the budget and says it is not complete; the rest counts as not done.
func TestDoneSetOverBudget(t *testing.T) {
	tr := filled(100_000, 3)
	text, complete := tr.AppendDone(nil, 4096)
	if complete || len(text) > 4096 || len(text) < 3000 {
		t.Fatalf("complete %v, %d bytes: want a truncated set near 4096 bytes", complete, len(text))
	}
	d, err := ParseDone(string(text))
	if err != nil {
		t.Fatal(err)
	}
	if d.Span < 8*2900 || d.Span >= 100_000 {
		t.Fatalf("span %d", d.Span)
	}
	if small, ok := tr.AppendDone(nil, 10); len(small) != 0 || ok {
		t.Fatalf("budget 10: %q, complete %v", small, ok)
	}
}

func mustBlob(t *testing.T, text string) []byte {
	t.Helper()
	b, err := decodeText(text)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseDoneRejects: foreign and malformed metadata is refused with the
// right error, never trusted.
func TestParseDoneRejects(t *testing.T) {
	tr := New(100)
	tr.Assign(10)
	var ms []Mark
	for i := range 20 {
		m, _ := tr.Emit(int64(10 + i))
		ms = append(ms, m)
	}
	_ = tr.Done(ms[3])
	good, _ := tr.AppendDone(nil, 4096)
	blob := mustBlob(t, string(good))
	reenc := func(b []byte) string { return encodeText(b) }
	flip := append([]byte(nil), blob...)
	flip[len(flip)-6] ^= 1
	for _, tc := range []struct {
		meta string
		want error
	}{
		{"member-1234", ErrForeign},
		{"xk", ErrForeign},
		{"xk:", ErrMalformed},
		{"xk:!!!!", ErrMalformed},
		{string(good[:len(good)-2]), ErrMalformed},
		{reenc(flip), ErrMalformed},
		{reenc(withCRC(append([]byte{2}, blob[1:len(blob)-4]...))), ErrMalformed},    // version 2
		{reenc(withCRC(append([]byte{1, 9}, blob[2:len(blob)-4]...))), ErrMalformed}, // kind 9
		{reenc(withCRC([]byte{1, doneKindRuns, 5, 3, 1, 1})), ErrMalformed},          // runs sum 2 of span 3
		{reenc(withCRC([]byte{1, doneKindRuns, 5, 2, 0, 2})), ErrMalformed},          // pending run 0
		{reenc(withCRC([]byte{1, doneKindBits, 5, 8, 1})), ErrMalformed},             // floor done
		{reenc(withCRC([]byte{1, doneKindBits, 5, 3, 0x0a})), ErrMalformed},          // bit past span
		{reenc(withCRC([]byte{1, doneKindBits, 5, 3, 0})), ErrMalformed},             // nothing done
		{reenc(withCRC([]byte{1, doneKindBits, 5, 0})), ErrMalformed},                // span 0
		{reenc(withCRC([]byte{1, doneKindRuns, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1, 1, 1})), ErrMalformed},
		{"xk:" + strings.Repeat("A", MaxDoneText), ErrMalformed},
	} {
		if _, err := ParseDone(tc.meta); !errors.Is(err, tc.want) {
			t.Errorf("ParseDone(%.40q) = %v, want %v", tc.meta, err, tc.want)
		}
	}
	if d, err := ParseDone(string(good)); err != nil || !d.Contains(13) || d.Contains(12) || d.Floor != 10 {
		t.Fatalf("good set: %+v, %v", d, err)
	}
}

// TestAppendDoneAllocatesNothing: encoding allocates nothing per offset
// (nothing at all, once the buffers have grown).
func TestAppendDoneAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector's instrumentation allocates behind the code (1 allocation per AppendDone under -race, 0 without)")
	}
	for _, every := range []int{2, 500} {
		tr := filled(10_000, every)
		buf, _ := tr.AppendDone(nil, 4096)
		if n := testing.AllocsPerRun(50, func() { buf, _ = tr.AppendDone(buf[:0], 4096) }); n != 0 {
			t.Errorf("every %d pending: %v allocations per AppendDone", every, n)
		}
	}
}

func FuzzParseDone(f *testing.F) {
	good, _ := filled(50, 3).AppendDone(nil, 4096)
	f.Add(string(good), []byte{})
	f.Add("", []byte{1, 2, 3})
	f.Add("xk:AQEFAwEB", []byte{0, 200, 7, 9, 30, 1})
	f.Fuzz(func(t *testing.T, meta string, ops []byte) {
		// Bytes from outside: never panic; a set that parses is sorted,
		// disjoint and within its span.
		if d, err := ParseDone(meta); err == nil {
			prev := d.Floor
			for _, r := range d.Ranges {
				if r.Lo <= prev || r.Hi <= r.Lo || r.Hi > d.Floor+d.Span {
					t.Fatalf("range %+v after %d, floor %d span %d", r, prev, d.Floor, d.Span)
				}
				prev = r.Hi
			}
		}
		if len(ops) > 0 {
			runDoneDifferential(t, &choices{data: ops})
		}
	})
}

func decodeText(meta string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimPrefix(meta, donePrefix))
}

func encodeText(b []byte) string { return donePrefix + base64.RawURLEncoding.EncodeToString(b) }

func withCRC(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// filled returns a tracker with offsets 0..n-1 emitted and all done but
// every every-th, from 0.
func filled(n, every int) *Tracker {
	tr := New(n)
	tr.Assign(0)
	for i := range n {
		m, _ := tr.Emit(int64(i))
		if i%every != 0 {
			_ = tr.Done(m)
		}
	}
	return tr
}
