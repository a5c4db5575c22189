package netio

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// The records codec: msgs frames (message records, encoded by the client,
// decoded and checked by the server in one pass) and outcomes frames
// (outcome records, the other way). Their layouts are in wire.go.

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
	t := recTally{lo: math.MaxUint32}
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
		if !t.add(root, kind, task, to, maxTo) {
			return t.inits, t.resets, t.lo, t.hi, false
		}
	}
	return t.inits, t.resets, t.lo, t.hi, true
}

// recTally is what the decoders' loops count of a frame's messages: its
// INITs and RESETs, and the range of the INITs' tasks. Four words, which
// the compiler keeps in registers once add is inlined.
type recTally struct {
	inits, resets int
	lo, hi        uint32
}

// add checks one decoded message's fields (ackcore's rule, Msg.Valid, and
// the wire's: a known kind, a task only on an INIT and within MaxTask,
// the timeout cap) and counts it; false when it is not valid.
func (t *recTally) add(root uint64, kind ackcore.Kind, task, to, maxTo uint32) bool {
	if root == 0 || kind-1 > ackcore.Reset-1 || to > maxTo || task > ackcore.MaxTask || task != 0 && kind != ackcore.Init {
		return false
	}
	switch kind {
	case ackcore.Init:
		t.inits++
		t.lo, t.hi = min(t.lo, task), max(t.hi, task)
	case ackcore.Reset:
		t.resets++
	}
	return true
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
	err := recordsError(n, func(i int) (ackcore.Msg, error) {
		r := body[i*msgSize:]
		kt := binary.LittleEndian.Uint32(r[offMsgKind:])
		return ackcore.Msg{Root: binary.LittleEndian.Uint64(r[offMsgRoot:]), Val: binary.LittleEndian.Uint64(r[offMsgVal:]),
			Task: kt & taskMask, Kind: ackcore.Kind(kt >> 24), TimeoutMs: binary.LittleEndian.Uint32(r[offMsgTimeout:])}, nil
	}, owns, maxTo)
	if err != nil {
		return err
	}
	return errOwnerChanged(n)
}

// errOwnerChanged is the error of a frame none of whose n records is at
// fault on the second pass: only an INIT's task changing owner between
// the two passes gets there.
func errOwnerChanged(n int) error {
	return fmt.Errorf("netio: msgs body of %d records refused: an INIT's task changed owner while the frame was read", n)
}

// recordsError walks a frame's n records in order (rec decodes record
// i, or says what keeps it from being decoded) and names the first the
// decoders refuse, or returns nil when none is at fault.
func recordsError(n int, rec func(i int) (ackcore.Msg, error), owns func(task uint32) bool, maxTo uint32) error {
	for i := range n {
		m, err := rec(i)
		if err != nil {
			return fmt.Errorf("netio: message %d of %d: %w", i, n, err)
		}
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
	return nil
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

// putPacked writes m as message i of a packed body's sections (pairs,
// kinds, extras; see wire.go), with task as its task field, and its
// extras record at index x when its task or timeout is not 0; it returns
// the extras records written so far. It is the one encoder of a packed
// message.
func putPacked(pairs, kinds, extra []byte, i, x int, m *ackcore.Msg, task uint32) int {
	p := (*[packedPair]byte)(pairs[i*packedPair:])
	binary.LittleEndian.PutUint64(p[0:], m.Root)
	binary.LittleEndian.PutUint64(p[8:], m.Val)
	k := byte(m.Kind)
	if task|m.TimeoutMs != 0 {
		k |= kindExtra
		e := (*[packedExtra]byte)(extra[x*packedExtra:])
		binary.LittleEndian.PutUint32(e[0:], task)
		binary.LittleEndian.PutUint32(e[4:], m.TimeoutMs)
		x++
	}
	kinds[i] = k
	return x
}

// appendPacked appends one packed msgs frame carrying msgs to b, each
// with its own Task, as appendMsgs does.
func appendPacked(b []byte, msgs []ackcore.Msg) []byte {
	n, x := len(msgs), 0
	for i := range msgs {
		if msgs[i].Task|msgs[i].TimeoutMs != 0 {
			x++
		}
	}
	size := packedFixed + n*packedMsgBytes + x*packedExtra
	b = appendHeaderV(b, typeMsgsPacked, headerSize+size, protoV2)
	off := len(b)
	b = grow(b, size)
	body := b[off:]
	binary.LittleEndian.PutUint32(body[offPackedN:], uint32(n))
	binary.LittleEndian.PutUint32(body[offPackedX:], uint32(x))
	pairs, kinds, extra := packedSections(body, n)
	j := 0
	for i := range msgs {
		j = putPacked(pairs, kinds, extra, i, j, &msgs[i], msgs[i].Task)
	}
	return b
}

// packedCounts reads a packed msgs body's counts, n messages and x
// extras records, and checks the body's size against them.
func packedCounts(body []byte) (n, x int, err error) {
	if len(body) < packedFixed {
		return 0, 0, fmt.Errorf("netio: packed msgs body of %d bytes, below its %d-byte counts", len(body), packedFixed)
	}
	n32 := binary.LittleEndian.Uint32(body[offPackedN:])
	x32 := binary.LittleEndian.Uint32(body[offPackedX:])
	if x32 > n32 {
		return 0, 0, fmt.Errorf("netio: packed msgs body claims %d extras records for %d messages", x32, n32)
	}
	if want := packedFixed + uint64(n32)*packedMsgBytes + uint64(x32)*packedExtra; want != uint64(len(body)) {
		return 0, 0, fmt.Errorf("netio: packed msgs body of %d bytes, want %d for %d messages and %d extras records", len(body), want, n32, x32)
	}
	return int(n32), int(x32), nil
}

// packedSections splits a packed body of n messages (its size checked)
// into its sections.
func packedSections(body []byte, n int) (pairs, kinds, extra []byte) {
	k := packedFixed + n*packedPair
	return body[packedFixed:k], body[k : k+n], body[k+n:]
}

// decodePacked is decodeMsgs for a packed msgs body: the same messages,
// checks and counts, from the packed layout.
func decodePacked(dst []ackcore.Msg, body []byte, owns func(task uint32) bool, maxTo uint32) (_ []ackcore.Msg, inits, resets int, _ error) {
	n, _, err := packedCounts(body)
	if err != nil {
		return dst, 0, 0, err
	}
	base := len(dst)
	dst = growMsgs(dst, n)
	out := dst[base:]
	maxTo = min(maxTo, ackcore.MaxTimeoutMs)
	pairs, kinds, extra := packedSections(body, n)
	inits, resets, lo, hi, ok := decodePackedRecords(out, pairs, kinds, extra, maxTo)
	if !ok || inits > 0 && owns != nil && !ownsRange(owns, lo, hi, out) {
		return dst[:base], 0, 0, decodePackedError(body, owns, maxTo)
	}
	return dst, inits, resets, nil
}

// decodePackedRecords is decodeRecords for a packed body's sections: it
// also reports false when a kind byte asks for an extras record past the
// last, for an extras record of task 0 and timeout 0 (each message has
// one encoding), and when extras records are left over.
func decodePackedRecords(out []ackcore.Msg, pairs, kinds, extra []byte, maxTo uint32) (inits, resets int, lo, hi uint32, ok bool) {
	t := recTally{lo: math.MaxUint32}
	pairs, kinds = pairs[:len(out)*packedPair], kinds[:len(out)]
	j := 0
	for i := range out {
		p := (*[packedPair]byte)(pairs[i*packedPair:])
		root := binary.LittleEndian.Uint64(p[0:])
		val := binary.LittleEndian.Uint64(p[8:])
		kb := kinds[i]
		var task, to uint32
		if kb&kindExtra != 0 {
			if (j+1)*packedExtra > len(extra) {
				return t.inits, t.resets, t.lo, t.hi, false
			}
			e := (*[packedExtra]byte)(extra[j*packedExtra:])
			task, to = binary.LittleEndian.Uint32(e[0:]), binary.LittleEndian.Uint32(e[4:])
			if task|to == 0 {
				return t.inits, t.resets, t.lo, t.hi, false // not the one encoding
			}
			j++
		}
		kind := ackcore.Kind(kb &^ kindExtra)
		m := &out[i]
		m.Root, m.Val, m.Task, m.Kind, m.TimeoutMs = root, val, task, kind, to
		if !t.add(root, kind, task, to, maxTo) {
			return t.inits, t.resets, t.lo, t.hi, false
		}
	}
	return t.inits, t.resets, t.lo, t.hi, j*packedExtra == len(extra)
}

// decodePackedError names what decodePacked refuses in body (its counts
// checked): the first message at fault, or extras records left over.
func decodePackedError(body []byte, owns func(task uint32) bool, maxTo uint32) error {
	n, x, _ := packedCounts(body)
	pairs, kinds, extra := packedSections(body, n)
	j := 0
	err := recordsError(n, func(i int) (ackcore.Msg, error) {
		p := pairs[i*packedPair:]
		m := ackcore.Msg{Root: binary.LittleEndian.Uint64(p[0:]), Val: binary.LittleEndian.Uint64(p[8:]), Kind: ackcore.Kind(kinds[i] &^ kindExtra)}
		if kinds[i]&kindExtra != 0 {
			if j == x {
				return m, fmt.Errorf("kind byte %#x asks for an extras record past the frame's %d", kinds[i], x)
			}
			e := extra[j*packedExtra:]
			m.Task, m.TimeoutMs = binary.LittleEndian.Uint32(e[0:]), binary.LittleEndian.Uint32(e[4:])
			if m.Task|m.TimeoutMs == 0 {
				return m, fmt.Errorf("%v root %#x has an extras record of task 0 and timeout 0 (a message without either has none)", m.Kind, m.Root)
			}
			j++
		}
		return m, nil
	}, owns, maxTo)
	if err != nil {
		return err
	}
	if j != x {
		return fmt.Errorf("netio: packed msgs body of %d messages uses %d of its %d extras records", n, j, x)
	}
	return errOwnerChanged(n)
}

// decodeFrameMsgs decodes a msgs or packed msgs frame's body with
// decodeMsgs or decodePacked.
func decodeFrameMsgs(t byte, dst []ackcore.Msg, body []byte, owns func(task uint32) bool, maxTo uint32) ([]ackcore.Msg, int, int, error) {
	if t == typeMsgsPacked {
		return decodePacked(dst, body, owns, maxTo)
	}
	return decodeMsgs(dst, body, owns, maxTo)
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
