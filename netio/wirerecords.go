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
// The loop (decodeRecords) reads each record's fields into registers,
// stores them field by field and checks the fields it holds (ackcore's
// Msg.Valid and the wire's rules), leaving at the first fault; only a
// frame that fails is walked again, record by record, to name the first
// bad one. Building the Msg as a value first made the compiler assemble
// it on the stack with small stores and copy it with 16-byte loads,
// which stall on store forwarding (twice per record: 12 ns a message on
// the 2-vCPU machine, against 1-2); checking the stored message
// (Msg.Valid) kept the loop's state in stack slots; folding the checks
// into one flag without an early exit cost more than the branches it
// saved.
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
//
// It walks body by reslicing it, a record at a time, not by index: an
// index made the compiler compute and check each record's offset, and
// spill the loop's state to the stack. An ACK, most of a stream, is
// recognised by its whole kind-and-task word (Ack<<24, no task) after the
// root and timeout checks, so it takes two predictable branches; the
// kind's switch runs for the others only.
func decodeRecords(out []ackcore.Msg, body []byte, maxTo uint32) (inits, resets int, lo, hi uint32, ok bool) {
	lo = math.MaxUint32
	body = body[:len(out)*msgSize]
	for i := range out {
		r := (*[msgSize]byte)(body)
		body = body[msgSize:]
		root := binary.LittleEndian.Uint64(r[offMsgRoot:])
		kt := binary.LittleEndian.Uint32(r[offMsgKind:])
		to := binary.LittleEndian.Uint32(r[offMsgTimeout:])
		m := &out[i]
		m.Root = root
		m.Val = binary.LittleEndian.Uint64(r[offMsgVal:])
		kind, task := ackcore.Kind(kt>>24), kt&taskMask
		m.Task, m.Kind, m.TimeoutMs = task, kind, to
		if root == 0 || to > maxTo {
			return inits, resets, lo, hi, false
		}
		if kt == uint32(ackcore.Ack)<<24 {
			continue
		}
		switch {
		case kind == ackcore.Init && task <= ackcore.MaxTask:
			inits++
			lo, hi = min(lo, task), max(hi, task)
		case task != 0:
			// A task on another kind than INIT, or past MaxTask.
			return inits, resets, lo, hi, false
		case kind == ackcore.Reset:
			resets++
		case kind != ackcore.Fail:
			return inits, resets, lo, hi, false
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
