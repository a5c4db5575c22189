package kafka

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// bufferRig drives one partition's buffer the way the poller and Next do
// (distribute a poll, take records and finish them), with no client: the
// tracker never fills, so nothing is paused.
type bufferRig struct {
	s    *Spout
	p    *partition
	recs []kgo.Record // reused in turn: ring
	at   int          // the next of recs to hand out
	next int64        // the next offset to fetch
	want int64        // the next offset take must return
}

func newBufferRig(t testing.TB, ring int) *bufferRig {
	s, err := New(Config{Brokers: []string{"127.0.0.1:9092"}, Topics: []string{"t"}, Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	s.onAssigned(context.Background(), nil, map[string][]int32{"t": {0}})
	value := []byte("the quick brown fox jumps over the lazy dog")
	recs := make([]kgo.Record, ring)
	for i := range recs {
		recs[i] = kgo.Record{Topic: "t", Value: value}
	}
	return &bufferRig{s: s, p: s.parts[tp{"t", 0}], recs: recs}
}

// poll distributes n records with the next offsets.
func (g *bufferRig) poll(n int) { g.pollInto(make([]*kgo.Record, n)) }

// pollInto distributes len(rs) records with the next offsets, the
// records' pointers written to rs.
func (g *bufferRig) pollInto(rs []*kgo.Record) {
	for i := range rs {
		r := &g.recs[g.at]
		g.at = (g.at + 1) % len(g.recs)
		r.Offset = g.next
		g.next++
		rs[i] = r
	}
	fs := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "t", Partitions: []kgo.FetchPartition{{
		Partition: 0, HighWatermark: g.next + 1_000_000, LastStableOffset: -1, Records: rs,
	}}}}}}
	g.s.mu.Lock()
	g.s.distribute(fs)
	g.s.check()
	g.s.mu.Unlock()
}

// take takes n records and finishes each; it reports an offset out of
// order as an error.
func (g *bufferRig) take(tb testing.TB, n int) {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	for range n {
		e := g.s.take()
		if e == nil {
			tb.Fatalf("nothing to take at offset %d, %d buffered", g.want, g.p.buffered())
		}
		if e.rec.Offset != g.want || e.mark.Offset != g.want {
			tb.Fatalf("took offset %d (mark %d), want %d", e.rec.Offset, e.mark.Offset, g.want)
		}
		g.want++
		g.s.finish(e, false)
	}
	g.s.check()
}

// A buffer that never runs empty (each poll appends what was taken since
// the last, as when Next is held back by the pending bound) hands out its
// records in order and holds no more blocks than its records need; the
// blocks it empties are reused, and hold no record once taken.
func TestBufferNeverEmptyStaysBounded(t *testing.T) {
	const held, poll = 3000, 500
	g := newBufferRig(t, 2*(held+poll))
	g.poll(held)
	for range 200 {
		g.poll(poll)
		g.take(t, poll)
		if n := g.p.buffered(); n != held {
			t.Fatalf("%d records buffered, want %d", n, held)
		}
		if n, most := len(g.p.buf.blocks), (held+recBlock-1)/recBlock+1; n > most {
			t.Fatalf("%d blocks for %d records, want at most %d", n, held, most)
		}
		if n, most := len(g.p.buf.blocks)+len(g.s.spare), (held+poll)/recBlock+2; n > most {
			t.Fatalf("%d blocks queued and spare, want at most %d: emptied blocks not reused", n, most)
		}
	}
	for i := range g.p.buf.head { // taken: no longer held
		if r := g.p.buf.blocks[0][i]; r != (bufRec{}) {
			t.Fatalf("entry %d before the head %d still holds offset %d", i, g.p.buf.head, r.offset)
		}
	}
	g.take(t, held)
	if g.p.buffered() != 0 || g.s.bufBytes != 0 || g.s.buffered != 0 {
		t.Fatalf("drained: %d buffered, %d bytes, %d counted", g.p.buffered(), g.s.bufBytes, g.s.buffered)
	}
	// A revocation drops what is buffered; every block comes back zeroed.
	g.poll(3 * recBlock / 2)
	g.s.mu.Lock()
	g.s.release(nil, g.p)
	g.s.check()
	g.s.mu.Unlock()
	if g.p.buffered() != 0 || len(g.p.buf.blocks) != 0 || g.s.bufBytes != 0 || g.s.buffered != 0 {
		t.Fatalf("released: %d buffered in %d blocks, %d bytes, %d counted", g.p.buffered(), len(g.p.buf.blocks), g.s.bufBytes, g.s.buffered)
	}
	for _, b := range g.s.spare {
		if *b != (block{}) {
			t.Fatal("a spare block holds records")
		}
	}
}

// BenchmarkBuffer is the poller's and Next's cost per record of the
// buffers at a steady state: a poll appended to a partition holding
// thousands of records (as the source level's partitions do), then as
// many taken and finished.
func BenchmarkBuffer(b *testing.B) {
	const held, poll = 6000, 500
	g := newBufferRig(b, 2*(held+poll))
	g.poll(held)
	rs := make([]*kgo.Record, poll)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		g.pollInto(rs)
		g.take(b, poll)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*poll), "ns/record")
}
