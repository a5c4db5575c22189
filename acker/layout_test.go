package acker

import (
	"testing"
	"unsafe"

	"github.com/xorack/xorack/internal/layout"
)

// TestReceiverLayout: a Receiver's three groups, each written by a
// different thread, sit on lines of their own: the taking goroutine's
// batch (buf, next, n, and the fields fixed at New before it), its take
// count and time (read by Stats), and holders (written by the executors).
// The struct ends on a line, so the next object starts on one.
func TestReceiverLayout(t *testing.T) {
	var r Receiver
	if err := layout.Apart("Receiver", unsafe.Offsetof(r.in), unsafe.Offsetof(r.lastTake),
		unsafe.Offsetof(r.holders), unsafe.Sizeof(r)); err != nil {
		t.Error(err)
	}
	// The taker's group ends before the padding that keeps it apart.
	if end := unsafe.Offsetof(r.n) + unsafe.Sizeof(r.n); end > layout.CacheLine {
		t.Errorf("Receiver: the taker's fields end at %d, past their line", end)
	}
	if end := unsafe.Offsetof(r.taken) + unsafe.Sizeof(r.taken); end > unsafe.Offsetof(r.holders) {
		t.Errorf("Receiver: taken ends at %d, past holders' line at %d", end, unsafe.Offsetof(r.holders))
	}
}

// TestGateLayout: a gate's n, which every producer reads once per INIT and
// the executor writes only when a receiver falls behind or catches up,
// has its line to itself: held's header and the producers' waiters and
// mu (written whenever one parks) start on the next.
func TestGateLayout(t *testing.T) {
	var g gate
	if err := layout.Apart("gate", unsafe.Offsetof(g.n), unsafe.Offsetof(g.held)); err != nil {
		t.Error(err)
	}
	for name, off := range map[string]uintptr{"held": unsafe.Offsetof(g.held), "waiters": unsafe.Offsetof(g.waiters),
		"mu": unsafe.Offsetof(g.mu), "ch": unsafe.Offsetof(g.ch), "closed": unsafe.Offsetof(g.closed)} {
		if off < layout.CacheLine {
			t.Errorf("gate: %s at offset %d shares n's line", name, off)
		}
	}
}
