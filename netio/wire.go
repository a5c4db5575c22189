package netio

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The wire format's layout in one place: the frame types, the header,
// every record's and body's offsets and sizes, the close codes and the
// limits; parseFrame, which checks a frame against them, and the header
// encoders. The codecs of the bodies are in wirerecords.go (messages and
// outcomes) and wirecontrol.go (handshake, heartbeat and close frames).

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
