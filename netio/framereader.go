package netio

import (
	"errors"
	"io"
)

// readChunk is the read buffer a connection starts with, in its
// handshake, and the room a frame's growth leaves behind it: 64 KiB is
// 2,730 message records per read system call.
const readChunk = 64 << 10

// bulkRead is the read buffer a connection has once its handshake is
// through (SetLimit), capped at its limit plus readChunk, the most its
// frames could grow it to anyway: a read takes in what several writes
// sent. On loopback a read that frees enough of the receive window also
// sends a window update, which the kernel carries to the writer's side
// at once, in the read's system call; with 64 KiB reads a
// connection at batch 256 read 3,200 times per 6,000,000 messages, with
// 256 KiB 1,190.
const bulkRead = 256 << 10

// coalesceBytes is how much a writer (the client's per host, the
// server's per connection) likes to have before it writes: with less, it
// yields its processor (runtime.Gosched), up to coalesceYields times
// (the server's, outcomeYields), and then writes what is there. On
// loopback a write system call costs microseconds whatever its size, and
// the peer's read as much again; a writer woken per frame wrote one
// frame per call. A yield lets the
// goroutines that fill its buffer (senders, the router) run first where
// they share its processor, and costs a scheduler pass when nothing else
// is runnable.
const coalesceBytes = 32 << 10

// coalesceYields is the most times a client host's writer yields before
// one write (it was both writers' when this was counted). Counted on the
// 2-vCPU machine (ackbench's net level, 1 and 4
// connections, batch 256, 10M messages each, two runs): about 150,000
// write calls without yielding, 79,000-97,000 after up to 3 yields,
// 62,000-80,000 after up to 8, and 93,000 or 199,000 after one. With 3,
// netio's CPU per message at batch 16 fell from 85-93 ns to 68-72 (see
// BENCHMARKS.md, network acker).
const coalesceYields = 3

// outcomeYields is coalesceYields for a server connection's writer,
// whose outcomes come at a ninth of the messages' bytes (one 24-byte
// outcome a tree of an INIT and 8 ACKs): with 3 yields it wrote them
// 10 KB a write on average (1,524 writes a 6,000,000-message
// BenchmarkLoopback run, against the client's 895 of 161 KB), and on
// loopback each write costs about what a client write of 40 KB does
// (the receive path and the reader's wake-up ride on it). With 8,
// 2,100-2,300 writes in all a run against 2,600-3,400, and the net
// level's CPU a message at batch 256 lower in 8 of 10 pairs (see
// BENCHMARKS.md, network acker). The client's writer, whose writes are
// 161 KB at batch 256, keeps coalesceYields.
const outcomeYields = 8

// frameReader reads frames from a stream into one buffer that it reuses.
// The buffer starts at readChunk bytes, takes bulkRead (at most the
// limit plus readChunk) once the handshake set the limit, and grows
// beyond only for a frame whose header has been read and checked against
// the limit, to at most that frame's size plus readChunk: a peer cannot
// make it allocate more than the limit allows. Not safe for concurrent
// use.
type frameReader struct {
	r     io.Reader
	buf   []byte
	start int // first unparsed byte
	end   int // end of read data
	limit int
	err   error // sticky read error
}

// newFrameReader reads frames of at most limit bytes from r.
func newFrameReader(r io.Reader, limit int) *frameReader {
	return &frameReader{r: r, buf: make([]byte, min(readChunk, max(limit, headerSize)+readChunk)), limit: limit}
}

// SetLimit changes the frame limit after a handshake, and grows the
// buffer to bulkRead bytes, at most limit+readChunk.
func (fr *frameReader) SetLimit(limit int) {
	fr.limit = limit
	if n := min(bulkRead, limit+readChunk); n > len(fr.buf) {
		nb := make([]byte, n)
		fr.end = copy(nb, fr.buf[fr.start:fr.end])
		fr.buf, fr.start = nb, 0
	}
}

// Buffered reports the bytes read but not yet returned as frames: when it
// is 0, the next Next will block on the stream.
func (fr *frameReader) Buffered() int { return fr.end - fr.start }

// Ready reports whether the next frame is wholly buffered, so that Next
// returns it (or its error) without reading: when it is false, Next may
// block on the stream.
func (fr *frameReader) Ready() bool {
	have := fr.end - fr.start
	if have < 4 {
		return false
	}
	b := fr.buf[fr.start:fr.end]
	n := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24
	return n <= uint64(have) || n > uint64(fr.limit) || n < headerSize
}

// Next returns the next frame. Its Body is valid until the next call. A
// malformed frame returns an error naming the bad value (see parseFrame),
// after which the stream is out of step and the caller should close it;
// io.EOF means the stream ended between frames, io.ErrUnexpectedEOF
// inside one.
func (fr *frameReader) Next() (wireFrame, error) {
	for {
		f, n, err := parseFrame(fr.buf[fr.start:fr.end], fr.limit)
		if err == nil {
			fr.start += n
			return f, nil
		}
		if !errors.Is(err, errShort) {
			return wireFrame{}, err
		}
		if fr.err != nil {
			if fr.err == io.EOF && fr.end > fr.start {
				return wireFrame{}, io.ErrUnexpectedEOF
			}
			return wireFrame{}, fr.err
		}
		fr.fill()
	}
}

// fill makes room and reads once.
func (fr *frameReader) fill() {
	have := fr.end - fr.start
	need := headerSize
	if have >= 4 {
		// parseFrame checked the length against the limit already.
		need = int(uint32(fr.buf[fr.start]) | uint32(fr.buf[fr.start+1])<<8 | uint32(fr.buf[fr.start+2])<<16 | uint32(fr.buf[fr.start+3])<<24)
	}
	// Move the unparsed bytes to the front when the frame would not fit
	// behind them, or when less than half the buffer (half of bulkRead at
	// most, once a frame grew it past that) is left to read into: a read
	// into a sliver of buffer returns a sliver of data, and costs a system
	// call all the same.
	if fr.start > 0 && (fr.start+need > len(fr.buf) || have == 0 || len(fr.buf)-fr.end < min(len(fr.buf), bulkRead)/2) {
		copy(fr.buf, fr.buf[fr.start:fr.end])
		fr.start, fr.end = 0, have
	}
	if need > len(fr.buf) {
		nb := make([]byte, need+readChunk)
		copy(nb, fr.buf[:fr.end])
		fr.buf = nb
	}
	n, err := fr.r.Read(fr.buf[fr.end:])
	fr.end += n
	if err != nil {
		fr.err = err
	} else if n == 0 {
		fr.err = io.ErrNoProgress
	}
}
