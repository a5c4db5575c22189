package netio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Closing for cause, saying why (docs/semantics.md, netio rule 13): close
// frames written best effort within closeWriteTimeout, the rest of a
// frame a timed-out write stopped in, and a lingering close that does not
// reset the connection under them.

// closeWith writes a close frame to c, best effort (closeWriteTimeout),
// and closes c.
func closeWith(c net.Conn, code uint16, reason string) {
	_ = c.SetWriteDeadline(time.Now().Add(closeWriteTimeout))
	_, _ = c.Write(appendClose(nil, code, reason))
	c.Close()
}

// linger discards what the client still sends, until it closes or
// closeWriteTimeout passes, once c closes for cause: the writer has sent
// the close frame (or gave up) and ended our side; forget closes the
// socket when both goroutines are out.
func (c *sconn) linger() {
	<-c.done
	_ = c.raw.SetReadDeadline(time.Now().Add(closeWriteTimeout))
	_, _ = io.Copy(io.Discard, c.raw)
}

// reject writes a close frame during the handshake, best effort
// (closeWriteTimeout); not over a TLS connection whose TLS handshake did
// not complete, which could not read it.
func (c *sconn) reject(code uint16, reason string) {
	if c.s.cfg.TLS != nil && c.nc == c.raw {
		return
	}
	_ = c.raw.SetWriteDeadline(time.Now().Add(closeWriteTimeout))
	_, _ = c.nc.Write(appendClose(nil, code, reason))
}

// closeError carries the close code a connection ends with, and the
// reason the close frame gives when it is not err's text (say).
type closeError struct {
	code uint16
	err  error
	say  string
}

func (e *closeError) Error() string { return e.err.Error() }
func (e *closeError) Unwrap() error { return e.err }

func codeOf(err error) uint16 {
	var ce *closeError
	if errors.As(err, &ce) {
		return ce.code
	}
	return closeNormal
}

func reasonOf(err error) string {
	if err == nil || errors.Is(err, io.EOF) {
		return "goodbye"
	}
	var ce *closeError
	if errors.As(err, &ce) && ce.say != "" {
		return ce.say
	}
	return err.Error()
}

// closeAfterTimeout, after a write of buf timed out with w bytes written,
// writes the rest of the frame it stopped in and a close frame (closeSlow,
// or closeMsg when fin: buf then ends with it), best effort within
// closeWriteTimeout: a client that starts reading again finds its stream
// whole and the reason. Not over TLS, whose connection a timed-out write
// leaves broken.
func (c *sconn) closeAfterTimeout(buf []byte, w int, err error, fin bool, closeMsg []byte) {
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || c.nc != c.raw {
		return
	}
	end := frameEnd(buf, w)
	tail := append([]byte(nil), buf[w:end]...)
	switch {
	case fin && end == len(buf):
		// The close frame was in the rest.
	case fin:
		tail = append(tail, closeMsg...)
	default:
		c.mu.Lock()
		cm := c.closeMsg
		c.mu.Unlock()
		if cm == nil {
			cm = appendClose(nil, closeSlow, fmt.Sprintf("netio: client took no bytes for %v (write timeout)", c.s.cfg.WriteTimeout))
		}
		tail = append(tail, cm...)
	}
	_ = c.raw.SetWriteDeadline(time.Now().Add(closeWriteTimeout))
	c.short.Store(true) // and linger: see writer
	_, _ = c.raw.Write(tail)
}

// frameEnd is the end of the frame of buf (whole frames, as the writer
// builds them) that byte w lies in; len(buf) past the last.
func frameEnd(buf []byte, w int) int {
	i := 0
	for i < len(buf) && i < w {
		if len(buf)-i < 4 {
			return len(buf)
		}
		n := int(binary.LittleEndian.Uint32(buf[i:]))
		if n < headerSize {
			return len(buf)
		}
		i += n
	}
	return min(i, len(buf))
}
