package kafka

import "github.com/twmb/franz-go/pkg/kgo"

// bufRec is a fetched record in its partition's buffer, with what take
// needs of it read when it was buffered (distribute reads the record's
// lengths then): take decides on the entry alone, without touching the
// record, which the client decoded long before and the buffers hold for
// up to two fetches (byteBound), so its memory is cold by then.
type bufRec struct {
	rec     *kgo.Record
	offset  int64
	bytes   int  // recBytes(rec)
	control bool // rec.Attrs.IsControl(): a transaction marker
}

// recBlock is how many records one block of a partition's buffer holds
// (16 KiB of entries).
const recBlock = 512

// maxSpareBlocks is how many emptied blocks a spout keeps for reuse; the
// rest are left to the garbage collector.
const maxSpareBlocks = 64

// block is a run of a partition's buffered records.
type block [recBlock]bufRec

// recQueue is a partition's buffer: the records fetched and not yet
// taken, oldest first, in blocks. Appending never moves the records
// queued and taking never copies them: a buffer held as one slice was
// compacted and regrown as polls appended to it, a copy with the garbage
// collector's write barriers of one and a half entries per record in the
// source level (its partitions hold up to tens of thousands of records).
// A block taken to its end goes back to the spout's spares, zeroed.
type recQueue struct {
	blocks []*block // blocks[0] holds the first record
	head   int      // the first record's index in blocks[0]
	n      int      // records queued
}

// len returns the records queued.
func (q *recQueue) len() int { return q.n }

// front returns the first record; the queue must not be empty.
func (q *recQueue) front() *bufRec { return &q.blocks[0][q.head] }

// at returns the i-th record from the front.
func (q *recQueue) at(i int) *bufRec {
	i += q.head
	return &q.blocks[i/recBlock][i%recBlock]
}

// push appends r, taking a block from spare when the last is full.
func (q *recQueue) push(r bufRec, spare *[]*block) {
	i := q.head + q.n
	if i == len(q.blocks)*recBlock {
		q.blocks = append(q.blocks, getBlock(spare))
	}
	q.blocks[i/recBlock][i%recBlock] = r
	q.n++
}

// pop drops the first record (the queue must not be empty) and returns
// the block it emptied, if any, to spare; it reports whether the queue is
// empty now.
func (q *recQueue) pop(spare *[]*block) bool {
	q.blocks[0][q.head] = bufRec{} // the record is no longer held here
	q.head++
	q.n--
	switch {
	case q.n == 0:
		q.head = 0 // the one block left is all zero: reused from its start
		return true
	case q.head == recBlock:
		putBlock(spare, q.blocks[0])
		copy(q.blocks, q.blocks[1:])
		q.blocks[len(q.blocks)-1] = nil
		q.blocks = q.blocks[:len(q.blocks)-1]
		q.head = 0
	}
	return false
}

// reset drops every record queued and returns the blocks to spare.
func (q *recQueue) reset(spare *[]*block) {
	for _, b := range q.blocks {
		clear(b[:])
		putBlock(spare, b)
	}
	clear(q.blocks)
	q.blocks, q.head, q.n = q.blocks[:0], 0, 0
}

// getBlock returns a zeroed block: a spare one, or a new one.
func getBlock(spare *[]*block) *block {
	if n := len(*spare); n > 0 {
		b := (*spare)[n-1]
		(*spare)[n-1] = nil
		*spare = (*spare)[:n-1]
		return b
	}
	return new(block)
}

// putBlock keeps b (zeroed) for reuse, up to maxSpareBlocks.
func putBlock(spare *[]*block, b *block) {
	if len(*spare) < maxSpareBlocks {
		*spare = append(*spare, b)
	}
}

// shaped reports whether q's blocks are as many as its records need, its
// head within the first (for check).
func (q *recQueue) shaped() bool {
	if q.n == 0 {
		return q.head == 0 && len(q.blocks) <= 1
	}
	return q.head < recBlock && len(q.blocks) == (q.head+q.n+recBlock-1)/recBlock
}
