package netio

import (
	"math/rand/v2"
	"testing"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// BenchmarkDecodeMsgs: a server's decode of a 256-message frame of
// word-count trees (an INIT and 8 ACKs each), ownership checked.
func BenchmarkDecodeMsgs(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	var msgs []ackcore.Msg
	for i := 0; len(msgs) < 256; i++ {
		msgs = append(msgs, tree(rng, uint64(i+1), 3, 8)...)
	}
	body := appendMsgs(nil, msgs[:256])[headerSize:]
	owns := func(task uint32) bool { return task == 3 }
	dst := make([]ackcore.Msg, 0, 256)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if dst, _, _, err = decodeMsgs(dst[:0], body, owns, ackcore.MaxTimeoutMs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*256), "ns/msg")
}

// BenchmarkPutRun: a client's check and encoding of a 256-message run of
// word-count trees into a host's frame (SendBatch's loop).
func BenchmarkPutRun(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	var msgs []ackcore.Msg
	for i := 0; len(msgs) < 256; i++ {
		msgs = append(msgs, tree(rng, uint64(i+1), 0, 8)...)
	}
	run := msgs[:256]
	c := &Client{spec: acker.Spec{Producers: 1, Tasks: 1}, frame: 256}
	p := &producer{c: c, stage: make([]stage, 1)}
	st := &p.stage[0]
	b.ReportAllocs()
	for b.Loop() {
		st.n, st.buf, st.inits = 0, st.buf[:0], st.inits[:0]
		n, k := p.putRun(st, run)
		if n != len(run) {
			b.Fatalf("encoded %d of %d", n, len(run))
		}
		p.stageRun(st, n, &k)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*256), "ns/msg")
}
