package netio

import (
	"math/rand/v2"
	"testing"

	"github.com/xorack/xorack/ackcore"
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
