package kafka

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// batchPool is the client's pool under Config.RecycleRecords: the record
// slices and decompressed bytes of batches whose records are all done
// (kgo.PoolRecords, kgo.PoolDecompressBytes). It keeps at most
// poolSlots of each, so what it holds is bounded by that many batches.
type batchPool struct {
	mu       sync.Mutex
	recs     [][]kgo.Record
	bytes    [][]byte
	returned int // PutRecords calls: batches whose records were all recycled (tests)
}

// poolSlots is how many record slices, and how many byte buffers, a
// batchPool keeps: about the batches of two fetches in flight.
const poolSlots = 32

// GetRecords returns a kept slice of at least n records, or a new one.
func (p *batchPool) GetRecords(n int) []kgo.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.recs) - 1; i >= 0; i-- {
		if r := p.recs[i]; cap(r) >= n {
			last := len(p.recs) - 1
			p.recs[i], p.recs[last] = p.recs[last], nil
			p.recs = p.recs[:last]
			return r[:0]
		}
	}
	return make([]kgo.Record, 0, n)
}

// PutRecords keeps r (zeroed by the client) if there is a slot.
func (p *batchPool) PutRecords(r []kgo.Record) {
	p.mu.Lock()
	p.returned++
	if len(p.recs) < poolSlots {
		p.recs = append(p.recs, r)
	}
	p.mu.Unlock()
}

// GetDecompressBytes returns a kept buffer, or nil (the decompressor
// allocates); the client grows one that is too small.
func (p *batchPool) GetDecompressBytes([]byte, kgo.CompressionCodecType) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.bytes)
	if n == 0 {
		return nil
	}
	b := p.bytes[n-1]
	p.bytes[n-1] = nil
	p.bytes = p.bytes[:n-1]
	return b
}

// PutDecompressBytes keeps b (zeroed by the client) if there is a slot.
func (p *batchPool) PutDecompressBytes(b []byte) {
	if cap(b) == 0 {
		return
	}
	p.mu.Lock()
	if len(p.bytes) < poolSlots {
		p.bytes = append(p.bytes, b)
	}
	p.mu.Unlock()
}
