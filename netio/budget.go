package netio

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/bytesize"
)

// DefaultClientMaxBytes is ClientConfig.MaxBytes' default: 4 GiB, the
// in-process acker's (acker.DefaultMaxBytes).
const DefaultClientMaxBytes = 4 << 30

// maxClientPending bounds ClientConfig.MaxPending (an int32's range on
// every platform), so that the footprint's products stay far inside an
// int64.
const maxClientPending = math.MaxInt32

// clientFootprint is the most heap a client's buffers may hold, in bytes,
// by part, as Dial computes it before it allocates (ClientConfig.MaxBytes).
// A slice grown by append may hold twice what it was filled with, and
// the counts below say so.
type clientFootprint struct {
	// pending: per host, a pending table grown for MaxPending roots (16
	// bytes a slot, at most half full: the smallest power of two at
	// least 2 x MaxPending slots) and the table it grew from; and once,
	// the outcomes of a lost host's roots (lose), at most MaxPending.
	pending int64
	// queues: per host, the outbound buffer the senders fill and the one
	// the writer writes (QueueBytes each, grown by append) and their
	// queues of INITs (a 16-byte record per message they hold at most).
	queues int64
	// reads: per host, the read buffer (MaxFrame and a read chunk) and
	// the reader's outcomes (deliverAt and a frame's, grown by append).
	reads int64
	// stages: per sender and host, a staged frame (FrameMsgs records)
	// and its INITs.
	stages int64
	// inboxes: per inbox, its MaxPending outcomes and, past them, a lost
	// host's (at most MaxPending), grown by append.
	inboxes int64
}

func (f clientFootprint) total() int64 {
	return f.pending + f.queues + f.reads + f.stages + f.inboxes
}

// footprint computes the client's budget for spec (checked) and c
// (filled and checked: MaxPending within maxClientPending).
func (c *ClientConfig) footprint(spec acker.Spec) clientFootprint {
	const (
		slot    = int64(unsafe.Sizeof(pendSlot{}))
		initRec = int64(unsafe.Sizeof(initRec{}))
	)
	out := int64(unsafe.Sizeof(ackcore.Outcome{}))
	hosts, mp := int64(len(c.Hosts)), int64(c.MaxPending)
	slots := int64(pendMinSlots)
	for slots < 2*mp {
		slots *= 2
	}
	q, frame := int64(c.QueueBytes), int64(c.FrameMsgs)
	return clientFootprint{
		pending: hosts*(slots+slots/2)*slot + mp*out,
		queues:  hosts * 2 * 2 * (q + q/msgSize*initRec),
		reads:   hosts * (int64(c.MaxFrame) + readChunk + 2*int64(deliverAt+maxMsgsPerFrame(c.MaxFrame))*out),
		stages:  int64(spec.Producers) * hosts * (headerSize + frame*msgSize + 2*frame*initRec),
		inboxes: int64(spec.Receivers) * 2 * 2 * mp * out,
	}
}

// checkBudget fails, naming the bytes and the values that make them,
// when the client could hold more than MaxBytes.
func (c *ClientConfig) checkBudget(spec acker.Spec) error {
	f := c.footprint(spec)
	if t := f.total(); t > c.MaxBytes {
		return fmt.Errorf("netio: %d hosts, MaxPending %d, QueueBytes %d, MaxFrame %d, %d senders × FrameMsgs %d and %d inboxes "+
			"may hold %s (pending tables %s, send queues %s, read buffers %s, staged frames %s, inboxes %s), over MaxBytes %s",
			len(c.Hosts), c.MaxPending, c.QueueBytes, c.MaxFrame, spec.Producers, c.FrameMsgs, spec.Receivers,
			bytesize.Of(t), bytesize.Of(f.pending), bytesize.Of(f.queues), bytesize.Of(f.reads), bytesize.Of(f.stages),
			bytesize.Of(f.inboxes), bytesize.Of(c.MaxBytes))
	}
	return nil
}
