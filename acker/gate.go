package acker

import (
	"sync"
	"sync/atomic"

	"github.com/xorack/xorack/internal/layout"
)

// gate is one shard's hold-back flags: held[r] is 1 while the shard holds
// Backlog or more outcomes for receiver r, and producers then keep new
// INITs of r's tasks from this shard (Send waits, TrySend says no).
//
// held and n are written by the shard's executor only and read by every
// producer: n once per INIT (a line that changes only when a receiver
// falls behind or catches up, so it stays in the producers' caches), held[r]
// only when n is not 0. A producer that must wait parks on ch; the
// executor, on releasing a receiver, closes ch and makes a new one if
// anyone waits (waiters), under mu. Close (from Stop) releases everyone
// for good.
type gate struct {
	n    atomic.Int32 // receivers held back; written by the executor
	_    [layout.CacheLine - 4]byte
	held []atomic.Uint32 // by receiver; immutable slice, elements written by the executor

	waiters atomic.Int32 // producers parked or about to park
	mu      sync.Mutex   // guards ch, closed
	ch      chan struct{}
	closed  bool
}

func newGate(receivers int) *gate {
	return &gate{held: make([]atomic.Uint32, receivers), ch: make(chan struct{})}
}

// hold starts holding back receiver r's INITs (executor only).
func (g *gate) hold(r uint32) {
	g.held[r].Store(1)
	g.n.Add(1)
}

// release stops holding back receiver r's INITs and wakes waiting
// producers (executor only).
func (g *gate) release(r uint32) {
	g.held[r].Store(0)
	g.n.Add(-1)
	if g.waiters.Load() > 0 {
		g.mu.Lock()
		if !g.closed {
			close(g.ch)
			g.ch = make(chan struct{})
		}
		g.mu.Unlock()
	}
}

// wait parks until receiver r is released or the gate closed. The caller
// re-checks both: a wake-up may be for another receiver.
func (g *gate) wait(r uint32) {
	g.waiters.Add(1)
	g.mu.Lock()
	ch, closed := g.ch, g.closed
	g.mu.Unlock()
	// Either release's store of held[r] comes before this load (and the
	// wait is skipped), or its load of waiters comes after the Add above
	// and it closes ch, this one or a later one (a later one only after
	// this goroutine took ch, so ch is closed too).
	if !closed && g.held[r].Load() != 0 {
		<-ch
	}
	g.waiters.Add(-1)
}

// close releases every waiter for good (Stop).
func (g *gate) close() {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		close(g.ch)
	}
	g.mu.Unlock()
}
