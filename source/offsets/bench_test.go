package offsets

import (
	"fmt"
	"math/bits"
	"testing"
	"unsafe"
)

// Benchmark shape. A window of W records is outstanding (emitted, not
// done). Each op marks one of them, chosen uniformly at random, done and
// emits the partition's next record in its place: two marks. So records
// complete out of order with geometric lifetimes (mean W ops), and the
// commit point trails the newest record by about W·ln W records, the
// oldest survivor. Every commitEvery ops the committer asks for the next
// commit and records it as accepted, as a spout's commit timer does. Both
// implementations run the same stream (same generator, same seed); W ops
// of warm-up run untimed first, so the sets and the ring are at their
// steady size. marks/s = 2 ops / time. B/outstanding is the memory the
// structure holds at the end (the tracker's done and run rings; the port's
// node slices), divided by W; the caller's window of W marks is not
// counted for either.
const (
	commitEvery = 1024
	// warmupWindows is the warm-up in windows: enough for the commit
	// point to trail by its steady W·ln W.
	warmupWindows = 16
	// trackerLimitPerWindow sizes the tracker's cap as a multiple of W:
	// the commit point trails by about W·ln W records (9.2 W at
	// W = 10,000) and by W·ln(ops) at most over a run, so 64 W is never
	// reached (an Emit refused would fail the benchmark).
	trackerLimitPerWindow = 64
)

var benchWindows = []int{100, 1000, 10_000, 100_000}

type trackerImpl struct {
	tb     testing.TB
	t      *Tracker
	window []Mark
}

func (x *trackerImpl) emitInto(slot int, off int64) {
	m, err := x.t.Emit(off)
	if err != nil {
		x.tb.Fatalf("Emit(%d): %v", off, err)
	}
	x.window[slot] = m
}

func (x *trackerImpl) done(slot int) {
	if err := x.t.Done(x.window[slot]); err != nil {
		x.tb.Fatal(err)
	}
}

func (x *trackerImpl) commit() {
	if off, ok := x.t.NextCommit(); ok {
		x.t.Committed(off)
	}
}

type stormImpl struct {
	p      *stormPort
	window []int64
}

func (x *stormImpl) done(slot int) { x.p.ack(x.window[slot]) }

func (x *stormImpl) commit() {
	if off, ok := x.p.findNextCommit(); ok {
		x.p.commit(off)
	}
}

// wyrand is the benchmark's generator: one multiply per draw, inlined, the
// same cost for both implementations.
type wyrand uint64

func (r *wyrand) below(n uint64) uint64 {
	*r += 0xa0761d6478bd642f
	hi, lo := bits.Mul64(uint64(*r), uint64(*r^0xe7037ed1a0b428db))
	hi, _ = bits.Mul64(hi^lo, n)
	return hi
}

func BenchmarkOffsets(b *testing.B) {
	for _, w := range benchWindows {
		// The two implementations of one window run one after the
		// other, so a -count loop interleaves them.
		b.Run(fmt.Sprintf("impl=tracker/window=%d", w), func(b *testing.B) {
			x := &trackerImpl{tb: b, t: New(trackerLimitPerWindow * w), window: make([]Mark, w)}
			x.t.Assign(0)
			runOffsets(b, w, x.emitInto, x.done, x.commit)
			b.ReportMetric(float64(x.t.RingBytes()+16*len(x.t.runs))/float64(w), "B/outstanding")
		})
		b.Run(fmt.Sprintf("impl=stormport/window=%d", w), func(b *testing.B) {
			x := &stormImpl{p: newStormPort(0), window: make([]int64, w)}
			emit := func(slot int, off int64) {
				x.p.emit(off)
				x.window[slot] = off
			}
			runOffsets(b, w, emit, x.done, x.commit)
			nodes := cap(x.p.emitted.nodes) + cap(x.p.acked.nodes)
			b.ReportMetric(float64(nodes*int(unsafe.Sizeof(avlNode{})))/float64(w), "B/outstanding")
		})
	}
}

// runOffsets fills the window, warms up, and times the ops.
func runOffsets(b *testing.B, w int, emit func(slot int, off int64), done func(slot int), commit func()) {
	var next int64
	for slot := range w {
		emit(slot, next)
		next++
	}
	rng := wyrand(1)
	op := func(i int) {
		slot := int(rng.below(uint64(w)))
		done(slot)
		emit(slot, next)
		next++
		if i%commitEvery == 0 {
			commit()
		}
	}
	for i := range warmupWindows * w {
		op(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		op(i)
		i++
	}
	b.ReportMetric(2*float64(i)/b.Elapsed().Seconds(), "marks/s")
}

// BenchmarkDoneSet: the done set's encode (AppendDone into the 4,096-byte
// default budget) and decode (ParseDone) with W records outstanding in the
// benchmark's steady state (random completion, the commit point trailing
// by about W·ln W records), beside the tracker's mark rate on the same
// window (BenchmarkOffsets impl=tracker). One encode per commit per
// partition: at 100 ms commits a 10 µs encode is 0.01% of a core.
// done/set is the offsets the text covers as done; bytes is its length.
func BenchmarkDoneSet(b *testing.B) {
	for _, w := range []int{10_000, 100_000} {
		x := &trackerImpl{tb: b, t: New(trackerLimitPerWindow * w), window: make([]Mark, w)}
		x.t.Assign(0)
		var next int64
		for slot := range w {
			x.emitInto(slot, next)
			next++
		}
		rng := wyrand(1)
		for range warmupWindows * w {
			slot := int(rng.below(uint64(w)))
			x.done(slot)
			x.emitInto(slot, next)
			next++
		}
		text, _ := x.t.AppendDone(nil, 4096)
		d, err := ParseDone(string(text))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("op=encode/window=%d", w), func(b *testing.B) {
			b.ReportAllocs()
			buf := text
			for b.Loop() {
				buf, _ = x.t.AppendDone(buf[:0], 4096)
			}
			b.ReportMetric(float64(len(buf)), "bytes")
			b.ReportMetric(float64(d.Len()), "done/set")
		})
		b.Run(fmt.Sprintf("op=decode/window=%d", w), func(b *testing.B) {
			b.ReportAllocs()
			s := string(text)
			for b.Loop() {
				if _, err := ParseDone(s); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(d.Len()), "done/set")
		})
	}
}
