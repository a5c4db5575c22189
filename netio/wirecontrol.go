package netio

import (
	"encoding/binary"
	"fmt"
	"time"
)

// The control frames' codecs: heartbeat and close, and the handshake's
// bodies (challenge, hello, welcome), read with reader, a sticky-error
// byte reader. Their layouts are in wire.go.

// appendHeartbeat appends a heartbeat frame.
func appendHeartbeat(b []byte) []byte { return appendHeader(b, typeHeartbeat, headerSize) }

// appendClose appends a close frame with code and reason (cut to
// maxReason bytes).
func appendClose(b []byte, code uint16, reason string) []byte {
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	b = appendHeader(b, typeClose, headerSize+closeFixed+len(reason))
	b = binary.LittleEndian.AppendUint16(b, code)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(reason)))
	return append(b, reason...)
}

// decodeClose parses a close body.
func decodeClose(body []byte) (code uint16, reason string, err error) {
	r := reader{b: body}
	code = r.u16()
	n := int(r.u16())
	text := r.bytes(n)
	if r.err == nil && len(r.b) != 0 {
		r.fail(fmt.Errorf("netio: close body has %d bytes after its %d-byte reason", len(r.b), n))
	}
	if r.err != nil {
		return 0, "", r.err
	}
	return code, string(text), nil
}

// challengeBody is the server's first frame.
type challengeBody struct {
	Nonce    [nonceSize]byte
	MaxFrame uint32
	Tasks    uint32
}

// appendChallenge appends a challenge frame.
func appendChallenge(b []byte, c *challengeBody) []byte {
	b = appendHeader(b, typeChallenge, headerSize+challengeSize)
	b = append(b, c.Nonce[:]...)
	b = binary.LittleEndian.AppendUint32(b, c.MaxFrame)
	return binary.LittleEndian.AppendUint32(b, c.Tasks)
}

// decodeChallenge parses a challenge body.
func decodeChallenge(body []byte) (challengeBody, error) {
	var c challengeBody
	r := reader{b: body}
	copy(c.Nonce[:], r.bytes(nonceSize))
	c.MaxFrame = r.u32()
	c.Tasks = r.u32()
	if err := r.end("challenge"); err != nil {
		return challengeBody{}, err
	}
	if c.MaxFrame < minMaxFrame {
		return challengeBody{}, fmt.Errorf("netio: challenge max frame %d below %d", c.MaxFrame, minMaxFrame)
	}
	return c, nil
}

// taskRange is the spout tasks [First, First+Count).
type taskRange struct{ First, Count uint32 }

// helloBody is the client's handshake.
type helloBody struct {
	MAC      [macSize]byte
	ClientID uint64
	MaxFrame uint32
	Tasks    []taskRange
}

// appendHello appends a hello frame; its MAC is h.MAC as given (see
// helloMAC).
func appendHello(b []byte, h *helloBody) []byte {
	b, off := beginFrame(b, typeHello)
	b = append(b, h.MAC[:]...)
	b = appendHelloSigned(b, h)
	return endFrame(b, off)
}

// appendHelloSigned appends the part of a hello body the MAC covers.
func appendHelloSigned(b []byte, h *helloBody) []byte {
	b = binary.LittleEndian.AppendUint64(b, h.ClientID)
	b = binary.LittleEndian.AppendUint32(b, h.MaxFrame)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(h.Tasks)))
	for _, t := range h.Tasks {
		b = binary.LittleEndian.AppendUint32(b, t.First)
		b = binary.LittleEndian.AppendUint32(b, t.Count)
	}
	return b
}

// decodeHello parses a hello body. It checks the range count against the
// body before allocating, and every range against maxTasks (the tasks the
// server serves); it does not check the MAC (see helloMAC).
func decodeHello(body []byte, maxTasks uint32) (helloBody, error) {
	var h helloBody
	r := reader{b: body}
	copy(h.MAC[:], r.bytes(macSize))
	h.ClientID = r.u64()
	h.MaxFrame = r.u32()
	n := r.u32()
	if r.err != nil {
		return helloBody{}, r.err
	}
	if uint64(n)*8 != uint64(len(r.b)) {
		return helloBody{}, fmt.Errorf("netio: hello claims %d task ranges in %d bytes", n, len(r.b))
	}
	if n > maxRanges {
		return helloBody{}, fmt.Errorf("netio: hello has %d task ranges, more than %d", n, maxRanges)
	}
	if h.MaxFrame < minMaxFrame {
		return helloBody{}, fmt.Errorf("netio: hello max frame %d below %d", h.MaxFrame, minMaxFrame)
	}
	h.Tasks = make([]taskRange, n)
	for i := range h.Tasks {
		t := taskRange{First: r.u32(), Count: r.u32()}
		if t.Count == 0 || uint64(t.First)+uint64(t.Count) > uint64(maxTasks) {
			return helloBody{}, fmt.Errorf("netio: hello task range %d [%d, %d) outside the server's tasks [0, %d)",
				i, t.First, uint64(t.First)+uint64(t.Count), maxTasks)
		}
		h.Tasks[i] = t
	}
	return h, r.err
}

// welcomeBody is the server's acceptance.
type welcomeBody struct {
	ServerID  uint64
	Heartbeat time.Duration // ms resolution on the wire
	Idle      time.Duration
}

// appendWelcome appends a welcome frame.
func appendWelcome(b []byte, w *welcomeBody) []byte {
	b = appendHeader(b, typeWelcome, headerSize+welcomeSize)
	b = binary.LittleEndian.AppendUint64(b, w.ServerID)
	b = binary.LittleEndian.AppendUint32(b, uint32(w.Heartbeat/time.Millisecond))
	b = binary.LittleEndian.AppendUint32(b, uint32(w.Idle/time.Millisecond))
	return binary.LittleEndian.AppendUint64(b, 0)
}

// decodeWelcome parses a welcome body.
func decodeWelcome(body []byte) (welcomeBody, error) {
	r := reader{b: body}
	w := welcomeBody{ServerID: r.u64()}
	w.Heartbeat = time.Duration(r.u32()) * time.Millisecond
	w.Idle = time.Duration(r.u32()) * time.Millisecond
	if z := r.u64(); r.err == nil && z != 0 {
		return welcomeBody{}, fmt.Errorf("netio: welcome reserved bytes %#x are not zero", z)
	}
	if err := r.end("welcome"); err != nil {
		return welcomeBody{}, err
	}
	if w.Heartbeat <= 0 || w.Idle <= w.Heartbeat {
		return welcomeBody{}, fmt.Errorf("netio: welcome heartbeat %v and idle timeout %v: want 0 < heartbeat < idle", w.Heartbeat, w.Idle)
	}
	return w, nil
}

// reader is a sticky-error byte reader: after the first short read every
// read returns zero and err keeps the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail(fmt.Errorf("netio: need %d bytes, have %d", n, len(r.b)))
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u16() uint16 {
	if b := r.bytes(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// end reports an error if bytes are left or a read fell short.
func (r *reader) end(what string) error {
	if r.err == nil && len(r.b) != 0 {
		return fmt.Errorf("netio: %s body has %d bytes left over", what, len(r.b))
	}
	return r.err
}
