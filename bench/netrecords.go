package bench

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/xorack/xorack/ackcore"
)

// The gRPC arm's payload: netio's message and outcome records (netio's
// package doc, "Wire format"), 24 bytes each, little-endian, without
// netio's frame header: a gRPC message is the frame. The acker checks
// every message it is handed (acker.Producer.SendBatch), so decoding
// checks only the lengths.
const (
	recordSize = 24
	// message record: root u64 | val u64 | kind<<24 | task (u32) | timeout ms u32
	recMsgKind, recMsgTimeout = 16, 20
	// outcome record: root u64 | latency ns i64 | task u32 | kind u8 | reason u8 | 0 u16
	recOutTask, recOutKind, recOutReason = 16, 20, 21
)

// appendMsgRecords appends msgs' records to b.
func appendMsgRecords(b []byte, msgs []ackcore.Msg) []byte {
	for i := range msgs {
		m := &msgs[i]
		task := uint32(0)
		if m.Kind == ackcore.Init {
			task = m.Task
		}
		b = binary.LittleEndian.AppendUint64(b, m.Root)
		b = binary.LittleEndian.AppendUint64(b, m.Val)
		b = binary.LittleEndian.AppendUint32(b, uint32(m.Kind)<<24|task)
		b = binary.LittleEndian.AppendUint32(b, m.TimeoutMs)
	}
	return b
}

// wholeRecords checks that b holds a whole number of records.
func wholeRecords(b []byte) error {
	if len(b)%recordSize != 0 {
		return fmt.Errorf("bench: grpc message of %d bytes is not a whole number of %d-byte records", len(b), recordSize)
	}
	return nil
}

// decodeMsgRecords appends the messages of b's records to dst.
func decodeMsgRecords(dst []ackcore.Msg, b []byte) ([]ackcore.Msg, error) {
	if err := wholeRecords(b); err != nil {
		return dst, err
	}
	for ; len(b) > 0; b = b[recordSize:] {
		r := b[:recordSize]
		kt := binary.LittleEndian.Uint32(r[recMsgKind:])
		dst = append(dst, ackcore.Msg{Root: binary.LittleEndian.Uint64(r), Val: binary.LittleEndian.Uint64(r[8:]),
			Kind: ackcore.Kind(kt >> 24), Task: kt & (1<<24 - 1), TimeoutMs: binary.LittleEndian.Uint32(r[recMsgTimeout:])})
	}
	return dst, nil
}

// appendOutcomeRecords appends outs' records to b.
func appendOutcomeRecords(b []byte, outs []ackcore.Outcome) []byte {
	for i := range outs {
		o := &outs[i]
		b = binary.LittleEndian.AppendUint64(b, o.Root)
		b = binary.LittleEndian.AppendUint64(b, uint64(o.Latency))
		b = binary.LittleEndian.AppendUint32(b, o.Task)
		b = append(b, byte(o.Kind), byte(o.Reason), 0, 0)
	}
	return b
}

// decodeOutcomeRecords appends the outcomes of b's records to dst.
func decodeOutcomeRecords(dst []ackcore.Outcome, b []byte) ([]ackcore.Outcome, error) {
	if err := wholeRecords(b); err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, len(b)/recordSize)
	for i := range len(b) / recordSize {
		r := b[i*recordSize : (i+1)*recordSize]
		dst = append(dst, ackcore.Outcome{Root: binary.LittleEndian.Uint64(r), Latency: time.Duration(binary.LittleEndian.Uint64(r[8:])),
			Task: binary.LittleEndian.Uint32(r[recOutTask:]), Kind: ackcore.OutcomeKind(r[recOutKind]), Reason: ackcore.Reason(r[recOutReason])})
	}
	return dst, nil
}
