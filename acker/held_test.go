package acker

import (
	"math/rand/v2"
	"testing"

	"github.com/xorack/xorack/ackcore"
)

// TestHeldQueueModel feeds random pushes and takes to a heldQueue and to
// a plain slice and compares every outcome taken, the length, and that
// the pool never keeps more than freeChunks chunks.
func TestHeldQueueModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q heldQueue
	var pool chunkPool
	var model []ackcore.Outcome
	next := uint64(1)
	ops := 40_000
	if testing.Short() {
		ops = 8_000
	}
	buf := make([]ackcore.Outcome, 4*chunkLen)
	for op := range ops {
		if rng.IntN(2) == 0 {
			n := rng.IntN(chunkLen)
			if rng.IntN(8) == 0 {
				n = rng.IntN(4 * chunkLen) // now and then longer than a chunk
			}
			batch := buf[:n]
			for i := range batch {
				batch[i] = ackcore.Outcome{Root: next}
				next++
			}
			q.push(batch, &pool)
			model = append(model, batch...)
		} else {
			// Take up to two chunks' worth, front by front, the last
			// front perhaps in part.
			for want := rng.IntN(2 * chunkLen); ; {
				f := q.front()
				if len(f) == 0 != (len(model) == 0) || len(f) > len(model) {
					t.Fatalf("op %d: front has %d, model %d", op, len(f), len(model))
				}
				k := min(want, len(f))
				for i := range k {
					if f[i] != model[i] {
						t.Fatalf("op %d: front[%d] = %d, model %d", op, i, f[i].Root, model[i].Root)
					}
				}
				q.pop(k, &pool)
				model = model[k:]
				if want -= k; want == 0 || k == 0 {
					break
				}
			}
		}
		if len(model) == 0 {
			model = nil // let the model's array go
		}
		if q.n != len(model) || len(pool.free) > freeChunks {
			t.Fatalf("op %d: queue %d, model %d, %d free chunks", op, q.n, len(model), len(pool.free))
		}
		if q.n == 0 && (q.head != nil || q.tail != nil) {
			t.Fatalf("op %d: empty queue keeps chunks", op)
		}
	}
}
