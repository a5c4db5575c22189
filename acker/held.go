package acker

import "github.com/xorack/xorack/ackcore"

// chunkLen is the outcomes in one chunk of a held queue: 512 × 32 bytes =
// 16 KiB, large enough that a chunk's allocation is rare next to the
// outcomes it holds, small enough that a receiver holding a few outcomes
// keeps little.
const chunkLen = 512

// freeChunks is how many emptied chunks an executor keeps for reuse; more
// go back to the garbage collector.
const freeChunks = 8

type chunk struct {
	next *chunk
	o    [chunkLen]ackcore.Outcome
}

// heldQueue is a FIFO of outcomes a shard holds for one receiver whose
// ring was full: a linked list of chunks, so that pushing and taking cost
// O(1) per outcome whatever its length (no copying the backlog), and
// memory follows its length. Owned by the executor.
type heldQueue struct {
	head, tail *chunk
	hi, ti     int // next outcome to take in head; next free slot in tail
	n          int // outcomes held
}

// chunkPool recycles an executor's chunks.
type chunkPool struct{ free []*chunk }

func (p *chunkPool) get() *chunk {
	if n := len(p.free); n > 0 {
		c := p.free[n-1]
		p.free = p.free[:n-1]
		return c
	}
	return new(chunk)
}

func (p *chunkPool) put(c *chunk) {
	if len(p.free) < freeChunks {
		c.next = nil
		p.free = append(p.free, c)
	}
}

// push appends os.
func (q *heldQueue) push(os []ackcore.Outcome, pool *chunkPool) {
	for len(os) > 0 {
		if q.tail == nil || q.ti == chunkLen {
			c := pool.get()
			if q.tail == nil {
				q.head, q.hi = c, 0
			} else {
				q.tail.next = c
			}
			q.tail, q.ti = c, 0
		}
		k := copy(q.tail.o[q.ti:], os)
		q.ti += k
		q.n += k
		os = os[k:]
	}
}

// front is the oldest held outcomes, contiguous (possibly not all of them).
func (q *heldQueue) front() []ackcore.Outcome {
	if q.head == nil {
		return nil
	}
	end := chunkLen
	if q.head == q.tail {
		end = q.ti
	}
	return q.head.o[q.hi:end]
}

// pop drops the first k outcomes of front().
func (q *heldQueue) pop(k int, pool *chunkPool) {
	if k == 0 {
		return
	}
	q.hi += k
	q.n -= k
	if q.head == q.tail {
		if q.hi == q.ti { // empty: keep nothing
			pool.put(q.head)
			q.head, q.tail, q.hi, q.ti = nil, nil, 0, 0
		}
		return
	}
	if q.hi == chunkLen {
		c := q.head
		q.head, q.hi = c.next, 0
		pool.put(c)
	}
}
