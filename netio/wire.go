package netio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// protoVersion is the protocol version this package speaks; every frame
// carries it (see doc.go, "Wire format").
const protoVersion = 1

// wireFrame types.
const (
	typeChallenge byte = 1 // server -> client, first frame: nonce, limits
	typeHello     byte = 2 // client -> server: MAC, client id, owned tasks
	typeWelcome   byte = 3 // server -> client: accepted
	typeMsgs      byte = 4 // client -> server: a batch of messages
	typeOutcomes  byte = 5 // server -> client: a batch of outcomes
	typeHeartbeat byte = 6 // either way, when idle
	typeClose     byte = 7 // either way: a reason, then the sender closes
	maxType            = typeClose
)

// wireFrame header: 8 bytes before every body.
//
//	0          4         5        6          8
//	+----------+---------+--------+----------+------------ ... ---+
//	| length   | version | type   | reserved | body               |
//	| u32 LE   | u8      | u8     | u16 = 0  | length-8 bytes     |
//	+----------+---------+--------+----------+------------ ... ---+
//
// length counts the whole frame, header included, so the smallest frame
// (a heartbeat) is 8 bytes.
const (
	offLength   = 0
	offVersion  = 4
	offType     = 5
	offReserved = 6
	headerSize  = 8
)

// Message record in a typeMsgs body: 24 bytes, the body is a whole number
// of them.
//
//	0        8        16             20           24
//	+--------+--------+--------------+------------+
//	| root   | val    | kind | task  | timeout ms |
//	| u64 LE | u64 LE | u32 LE:      | u32 LE     |
//	|        |        | kind<<24 |   |            |
//	|        |        | task         |            |
//	+--------+--------+--------------+------------+
const (
	offMsgRoot    = 0
	offMsgVal     = 8
	offMsgKind    = 16 // kind in the top 8 bits, task in the low 24
	offMsgTimeout = 20
	msgSize       = 24
)

// Outcome record in a typeOutcomes body: 24 bytes.
//
//	0        8             16       20     21       22      24
//	+--------+-------------+--------+------+--------+-------+
//	| root   | latency ns  | task   | kind | reason | 0     |
//	| u64 LE | i64 LE      | u32 LE | u8   | u8     | u16   |
//	+--------+-------------+--------+------+--------+-------+
const (
	offOutRoot    = 0
	offOutLatency = 8
	offOutTask    = 16
	offOutKind    = 20
	offOutReason  = 21
	offOutPad     = 22
	outcomeSize   = 24
)

// Handshake bodies.
//
// challengeBody (server -> client), 40 bytes:
//
//	0                    32           36          40
//	+--------------------+------------+-----------+
//	| nonce [32]         | max frame  | tasks     |
//	|                    | u32 LE     | u32 LE    |
//	+--------------------+------------+-----------+
//
// max frame is the largest frame the server accepts; tasks the number of
// spout task ids it serves ([0, tasks)).
const (
	offChNonce    = 0
	offChMaxFrame = 32
	offChTasks    = 36
	challengeSize = 40
	nonceSize     = 32
)

// helloBody (client -> server), 48 + 8*ranges bytes:
//
//	0          32          40          44          48
//	+----------+-----------+-----------+-----------+--------------------+
//	| mac [32] | client id | max frame | ranges n  | n x (first, count) |
//	|          | u64 LE    | u32 LE    | u32 LE    | u32 LE, u32 LE     |
//	+----------+-----------+-----------+-----------+--------------------+
//
// The tasks the client owns are the union of the ranges [first,
// first+count). mac is HMAC-SHA256(secret, "xorack-netio-v1" || nonce ||
// the hello body after the mac), so the secret never crosses the wire, a
// hello cannot be replayed on another connection, and the claimed tasks
// are authenticated. max frame is the largest frame the client accepts.
const (
	offHeMAC      = 0
	offHeClient   = 32
	offHeMaxFrame = 40
	offHeRanges   = 44
	helloFixed    = 48
	macSize       = 32
)

// welcomeBody (server -> client), 24 bytes:
//
//	0           8           12           16          24
//	+-----------+-----------+------------+-----------+
//	| server id | heartbeat | idle       | 0         |
//	| u64 LE    | ms u32 LE | ms u32 LE  | u64       |
//	+-----------+-----------+------------+-----------+
//
// server id is random per server process (a client sees a restart);
// heartbeat is how often each side sends a heartbeat when it has nothing
// else to send, idle how long either side waits for a frame before it
// gives the connection up.
const (
	offWeServer    = 0
	offWeHeartbeat = 8
	offWeIdle      = 12
	welcomeSize    = 24
)

// Close, 4 + n bytes: a code and up to maxReason bytes of text.
//
//	0          2          4
//	+----------+----------+---------------+
//	| code     | text len | text          |
//	| u16 LE   | u16 LE   | len bytes     |
//	+----------+----------+---------------+
const (
	offClCode  = 0
	offClLen   = 2
	closeFixed = 4
	maxReason  = 512
)

// Close codes.
const (
	closeNormal     uint16 = 0 // the peer is going away (client Stop)
	closeShutdown   uint16 = 1 // the server is shutting down; pending roots were reported
	closeAuth       uint16 = 2 // the handshake failed authentication
	closeProtocol   uint16 = 3 // a malformed or unexpected frame
	closeTaskOwned  uint16 = 4 // a claimed task belongs to another client
	closeSlow       uint16 = 5 // the client did not take its outcomes
	closeReplaced   uint16 = 6 // a newer connection of the same client took over
	closeIdle       uint16 = 7 // nothing arrived within the idle timeout
	closeOverloaded uint16 = 8 // the server is at its connection limit
)

// Limits.
const (
	// DefaultMaxFrame is the largest frame accepted by default: 1 MiB
	// holds 43,690 messages, far more than a batch needs, and bounds what
	// one connection's read buffer can grow to.
	DefaultMaxFrame = 1 << 20
	// minMaxFrame is the smallest frame limit a peer may declare: a
	// handshake frame with a few task ranges fits.
	minMaxFrame = 4096
	// handshakeMaxFrame bounds frames before authentication, so that an
	// unauthenticated connection can make the server allocate at most
	// this much. 64 KiB holds a hello with 8,000 task ranges.
	handshakeMaxFrame = 64 << 10
	// maxRanges is the most task ranges a hello may carry.
	maxRanges = (handshakeMaxFrame - headerSize - helloFixed) / 8
)

// errShort is returned by parseFrame when b holds no whole frame yet.
var errShort = errors.New("netio: short frame")

// wireFrame is one parsed frame; Body aliases the parsed bytes.
type wireFrame struct {
	Type    byte
	Version byte
	Body    []byte
}

// parseFrame parses the frame at the start of b and returns it and its
// length. It checks the length prefix against limit before anything
// else, so a caller can read a header, learn the frame is too big and
// refuse it without allocating for it. It returns errShort when b holds
// less than the frame (or its header), and otherwise an error naming the
// bad value: a length below the header or over limit, another version, an
// unknown type, non-zero reserved bits, a body of the wrong size for its
// type. It never panics.
func parseFrame(b []byte, limit int) (wireFrame, int, error) {
	if len(b) < 4 {
		return wireFrame{}, 0, errShort
	}
	n := binary.LittleEndian.Uint32(b[offLength:])
	if uint64(n) > uint64(limit) {
		return wireFrame{}, 0, fmt.Errorf("netio: frame length %d exceeds limit %d", n, limit)
	}
	if n < headerSize {
		return wireFrame{}, 0, fmt.Errorf("netio: frame length %d below the %d-byte header", n, headerSize)
	}
	if len(b) < headerSize {
		return wireFrame{}, 0, errShort
	}
	f := wireFrame{Version: b[offVersion], Type: b[offType]}
	if f.Version != protoVersion {
		return wireFrame{}, 0, fmt.Errorf("netio: frame version %d, this side speaks %d", f.Version, protoVersion)
	}
	if f.Type == 0 || f.Type > maxType {
		return wireFrame{}, 0, fmt.Errorf("netio: unknown frame type %d", f.Type)
	}
	if r := binary.LittleEndian.Uint16(b[offReserved:]); r != 0 {
		return wireFrame{}, 0, fmt.Errorf("netio: frame reserved bits %#x are not zero", r)
	}
	body := int(n) - headerSize
	if err := checkBodySize(f.Type, body); err != nil {
		return wireFrame{}, 0, err
	}
	if len(b) < int(n) {
		return wireFrame{}, 0, errShort
	}
	f.Body = b[headerSize:n:n]
	return f, int(n), nil
}

// checkBodySize checks what the header alone tells of a body's size.
func checkBodySize(t byte, n int) error {
	want := -1
	switch t {
	case typeChallenge:
		want = challengeSize
	case typeWelcome:
		want = welcomeSize
	case typeHeartbeat:
		want = 0
	case typeMsgs, typeOutcomes:
		if n%msgSize != 0 { // msgSize == outcomeSize
			return fmt.Errorf("netio: %s body of %d bytes is not a whole number of %d-byte records", typeName(t), n, msgSize)
		}
		return nil
	case typeHello:
		if n < helloFixed || (n-helloFixed)%8 != 0 {
			return fmt.Errorf("netio: hello body of %d bytes: want %d + 8 per task range", n, helloFixed)
		}
		return nil
	case typeClose:
		if n < closeFixed || n > closeFixed+maxReason {
			return fmt.Errorf("netio: close body of %d bytes out of range [%d, %d]", n, closeFixed, closeFixed+maxReason)
		}
		return nil
	}
	if n != want {
		return fmt.Errorf("netio: %s body of %d bytes, want %d", typeName(t), n, want)
	}
	return nil
}

func typeName(t byte) string {
	switch t {
	case typeChallenge:
		return "challenge"
	case typeHello:
		return "hello"
	case typeWelcome:
		return "welcome"
	case typeMsgs:
		return "msgs"
	case typeOutcomes:
		return "outcomes"
	case typeHeartbeat:
		return "heartbeat"
	case typeClose:
		return "close"
	}
	return fmt.Sprintf("type %d", t)
}

// appendHeader appends a header for a frame of n bytes in all.
func appendHeader(b []byte, t byte, n int) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	return append(b, protoVersion, t, 0, 0)
}

// beginFrame appends a header whose length EndFrame fills in, and returns
// the header's offset.
func beginFrame(b []byte, t byte) ([]byte, int) {
	return appendHeader(b, t, 0), len(b)
}

// endFrame sets the length of the frame begun at off.
func endFrame(b []byte, off int) []byte {
	binary.LittleEndian.PutUint32(b[off:], uint32(len(b)-off))
	return b
}

// putMsg writes m's record at b[0:msgSize] with task as its task field
// (m.Task, or the client's TaskBase added to it; 0 for any kind but
// INIT). It is the one encoder of a message record.
func putMsg(b []byte, m *ackcore.Msg, task uint32) {
	b = b[:msgSize:msgSize]
	binary.LittleEndian.PutUint64(b[offMsgRoot:], m.Root)
	binary.LittleEndian.PutUint64(b[offMsgVal:], m.Val)
	binary.LittleEndian.PutUint32(b[offMsgKind:], uint32(m.Kind)<<24|task)
	binary.LittleEndian.PutUint32(b[offMsgTimeout:], m.TimeoutMs)
}

// taskMask is the task field of a message record: 24 bits, room for
// ackcore.MaxTask (20 bits) with the kind above it.
const taskMask = 1<<24 - 1

// appendMsgs appends one msgs frame carrying msgs to b. msgs must be
// valid (ackcore.Msg.Validate): the peer rejects the frame otherwise. The
// caller keeps len(msgs) within its peer's frame limit (maxMsgsPerFrame).
func appendMsgs(b []byte, msgs []ackcore.Msg) []byte {
	n := headerSize + len(msgs)*msgSize
	b = appendHeader(b, typeMsgs, n)
	off := len(b)
	b = grow(b, len(msgs)*msgSize)
	for i := range msgs {
		putMsg(b[off+i*msgSize:], &msgs[i], msgs[i].Task&taskMask)
	}
	return b
}

// maxMsgsPerFrame is the most message or outcome records a frame within
// limit holds.
func maxMsgsPerFrame(limit int) int { return (limit - headerSize) / msgSize }

// grow extends b by n bytes (contents unspecified), reusing its capacity.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), 2*cap(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

// decodeMsgBody appends the messages of a msgs frame's body to dst. Every
// record must be a valid message (ackcore.Msg.Validate): a non-zero root,
// a known kind, a task within ackcore.MaxTask (and none on other kinds
// than INIT), a timeout within ackcore.MaxTimeout; the first that is not
// is named in the error, and dst is returned as it was.
//
// The loop reads each record's fields into registers, stores them field
// by field and checks the fields it holds (ackcore's Msg.Valid and the
// wire's rules) into one flag, with no early exit; only a frame that
// fails is walked again, record by record, to name the first bad one.
// Building the Msg as a value first made the compiler assemble it on the
// stack with small stores and copy it with 16-byte loads, which stall on
// store forwarding (twice per record: 12 ns a message on the 2-vCPU
// machine, against 1-2); checking the stored message (Msg.Valid) and
// leaving at the first fault kept the loop's state in stack slots.
func decodeMsgBody(dst []ackcore.Msg, body []byte) ([]ackcore.Msg, error) {
	dst, _, _, err := decodeMsgs(dst, body, nil, ackcore.MaxTimeoutMs)
	return dst, err
}

// decodeMsgs is decodeMsgBody that also counts the INITs and the RESETs,
// refuses a timeout past maxTo (a server's root timeout cap; at most
// ackcore.MaxTimeoutMs) and, when owns is not nil, checks each INIT's task with it
// (a server: the task must be the connection's), in the same pass.
func decodeMsgs(dst []ackcore.Msg, body []byte, owns func(task uint32) bool, maxTo uint32) (_ []ackcore.Msg, inits, resets int, _ error) {
	if len(body)%msgSize != 0 {
		return dst, 0, 0, fmt.Errorf("netio: msgs body of %d bytes is not a whole number of %d-byte records", len(body), msgSize)
	}
	n := len(body) / msgSize
	base := len(dst)
	dst = growMsgs(dst, n)
	out := dst[base:]
	maxTo = min(maxTo, ackcore.MaxTimeoutMs)
	// The loop (decodeRecords) makes no call, so that its state stays in
	// registers: it checks each record (ackcore's rule, Msg.Valid, and the
	// wire's: a known kind, a task only on an INIT and within MaxTask, the
	// timeout cap) and bounds the INITs' tasks by lo and hi. Ownership is then
	// checked over that range, once per frame (a frame's INITs mostly
	// come from one spout task): a frame is checked as of one moment, as
	// it is decoded before any of it is applied. The first record at
	// fault is found, and named, by decodeMsgsError.
	inits, resets, lo, hi, ok := decodeRecords(out, body, maxTo)
	if !ok || inits > 0 && owns != nil && !ownsRange(owns, lo, hi, out) {
		return dst[:base], 0, 0, decodeMsgsError(body, owns, maxTo)
	}
	return dst, inits, resets, nil
}

// decodeRecords is decodeMsgs' loop, a leaf of its own so that its few
// live values stay in registers: it decodes len(out) records of body
// into out, counts the INITs and RESETs, bounds the INITs' tasks by lo
// and hi, and reports false at the first record that is not a valid
// message (its fields are then partly decoded).
func decodeRecords(out []ackcore.Msg, body []byte, maxTo uint32) (inits, resets int, lo, hi uint32, ok bool) {
	lo = math.MaxUint32
	body = body[:len(out)*msgSize]
	for i := range out {
		r := (*[msgSize]byte)(body[i*msgSize:])
		root := binary.LittleEndian.Uint64(r[offMsgRoot:])
		val := binary.LittleEndian.Uint64(r[offMsgVal:])
		kt := binary.LittleEndian.Uint32(r[offMsgKind:])
		to := binary.LittleEndian.Uint32(r[offMsgTimeout:])
		kind, task := ackcore.Kind(kt>>24), kt&taskMask
		m := &out[i]
		m.Root, m.Val, m.Task, m.Kind, m.TimeoutMs = root, val, task, kind, to
		if root == 0 || kind-1 > ackcore.Reset-1 || to > maxTo || task > ackcore.MaxTask || task != 0 && kind != ackcore.Init {
			return inits, resets, lo, hi, false
		}
		switch kind {
		case ackcore.Init:
			inits++
			lo, hi = min(lo, task), max(hi, task)
		case ackcore.Reset:
			resets++
		}
	}
	return inits, resets, lo, hi, true
}

// ownsRangeMax is the widest range of INIT tasks in one frame that
// ownsRange checks task by task; past it, it checks each INIT.
const ownsRangeMax = 64

// ownsRange reports whether owns holds for every INIT's task in msgs,
// whose INITs' tasks lie in [lo, hi].
func ownsRange(owns func(task uint32) bool, lo, hi uint32, msgs []ackcore.Msg) bool {
	if hi-lo < ownsRangeMax {
		all := true
		for t := lo; t <= hi && all; t++ {
			all = owns(t)
		}
		if all {
			return true
		}
	}
	// A wide range, or one with a task not owned in it: look at each INIT.
	last, ok := uint32(math.MaxUint32), false
	for i := range msgs {
		if t := msgs[i].Task; msgs[i].Kind == ackcore.Init && t != last {
			if last, ok = t, owns(t); !ok {
				return false
			}
		}
	}
	return true
}

// decodeMsgsError names the first record of body that decodeMsgs
// refuses: the error path, one record at a time.
func decodeMsgsError(body []byte, owns func(task uint32) bool, maxTo uint32) error {
	n := len(body) / msgSize
	for i := range n {
		r := body[i*msgSize:]
		kt := binary.LittleEndian.Uint32(r[offMsgKind:])
		m := ackcore.Msg{Root: binary.LittleEndian.Uint64(r[offMsgRoot:]), Val: binary.LittleEndian.Uint64(r[offMsgVal:]),
			Task: kt & taskMask, Kind: ackcore.Kind(kt >> 24), TimeoutMs: binary.LittleEndian.Uint32(r[offMsgTimeout:])}
		if !m.Valid() || m.Kind != ackcore.Init && m.Task != 0 {
			return fmt.Errorf("netio: message %d of %d: %w", i, n, msgError(&m))
		}
		if m.TimeoutMs > maxTo {
			return fmt.Errorf("netio: message %d of %d: %v root %#x asks for a timeout of %d ms, past the server's cap of %d ms", i, n, m.Kind, m.Root, m.TimeoutMs, maxTo)
		}
		if m.Kind == ackcore.Init && owns != nil && !owns(m.Task) {
			return fmt.Errorf("netio: message %d of %d: INIT root %#x names task %d, not owned by this client", i, n, m.Root, m.Task)
		}
	}
	// Only an INIT's task changing owner between the two passes gets here.
	return fmt.Errorf("netio: msgs body of %d records refused: an INIT's task changed owner while the frame was read", n)
}

// msgError names what is wrong with a decoded record.
func msgError(m *ackcore.Msg) error {
	if m.Kind != ackcore.Init && m.Task != 0 && m.Kind >= ackcore.Init && m.Kind <= ackcore.Reset && m.Root != 0 {
		return fmt.Errorf("%v root %#x carries task %d (only INIT names a task)", m.Kind, m.Root, m.Task)
	}
	if err := m.Validate(); err != nil {
		return err
	}
	return fmt.Errorf("invalid message %+v", *m)
}

func growMsgs(dst []ackcore.Msg, n int) []ackcore.Msg {
	if cap(dst)-len(dst) < n {
		nd := make([]ackcore.Msg, len(dst), len(dst)+n)
		copy(nd, dst)
		dst = nd
	}
	return dst[:len(dst)+n]
}

// appendOutcomes appends one outcomes frame carrying outs to b.
func appendOutcomes(b []byte, outs []ackcore.Outcome) []byte {
	b = appendHeader(b, typeOutcomes, headerSize+len(outs)*outcomeSize)
	off := len(b)
	b = grow(b, len(outs)*outcomeSize)
	for i := range outs {
		putOutcome(b[off+i*outcomeSize:], &outs[i])
	}
	return b
}

func putOutcome(r []byte, o *ackcore.Outcome) {
	_ = r[outcomeSize-1]
	binary.LittleEndian.PutUint64(r[offOutRoot:], o.Root)
	binary.LittleEndian.PutUint64(r[offOutLatency:], uint64(o.Latency))
	binary.LittleEndian.PutUint32(r[offOutTask:], o.Task)
	r[offOutKind] = byte(o.Kind)
	r[offOutReason] = byte(o.Reason)
	r[offOutPad], r[offOutPad+1] = 0, 0
}

// decodeOutcomes appends the outcomes of an outcomes frame's body to dst.
// Each record must have a known kind and reason and a zero pad; the first
// that does not is named in the error, and dst is returned as it was.
func decodeOutcomes(dst []ackcore.Outcome, body []byte) ([]ackcore.Outcome, error) {
	if len(body)%outcomeSize != 0 {
		return dst, fmt.Errorf("netio: outcomes body of %d bytes is not a whole number of %d-byte records", len(body), outcomeSize)
	}
	n := len(body) / outcomeSize
	base := len(dst)
	if cap(dst)-len(dst) < n {
		nd := make([]ackcore.Outcome, len(dst), len(dst)+n)
		copy(nd, dst)
		dst = nd
	}
	dst = dst[:base+n]
	out := dst[base:]
	for i := range out {
		r := body[i*outcomeSize:]
		r = r[:outcomeSize:outcomeSize]
		root, lat, task, kind, reason, ok := outcomeFields(r)
		if !ok {
			return dst[:base], fmt.Errorf("netio: outcome %d of %d: %w", i, n, outcomeError(r))
		}
		o := &out[i]
		o.Root, o.Latency, o.Task, o.Kind, o.Reason = root, lat, task, kind, reason
	}
	return dst, nil
}

// outcomeFields reads the outcome record r (outcomeSize bytes); ok says
// it is valid: a non-zero root, a known kind and reason, a zero pad (see
// outcomeError). Plain results, not a struct: the caller keeps them in
// registers.
func outcomeFields(r []byte) (root uint64, lat time.Duration, task uint32, kind ackcore.OutcomeKind, reason ackcore.Reason, ok bool) {
	r = r[:outcomeSize:outcomeSize]
	root = binary.LittleEndian.Uint64(r[offOutRoot:])
	lat = time.Duration(binary.LittleEndian.Uint64(r[offOutLatency:]))
	task = binary.LittleEndian.Uint32(r[offOutTask:])
	kind, reason = ackcore.OutcomeKind(r[offOutKind]), ackcore.Reason(r[offOutReason])
	ok = kind-ackcore.Completed <= ackcore.Refused-ackcore.Completed && reason <= ackcore.ReasonLost &&
		r[offOutPad]|r[offOutPad+1] == 0 && root != 0
	return
}

// outcomeError names what is wrong with the invalid outcome record r.
func outcomeError(r []byte) error {
	return fmt.Errorf("root %#x kind %d reason %d pad %#x: not a valid outcome", binary.LittleEndian.Uint64(r[offOutRoot:]),
		r[offOutKind], r[offOutReason], binary.LittleEndian.Uint16(r[offOutPad:]))
}

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
