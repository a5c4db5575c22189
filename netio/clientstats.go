package netio

import (
	"cmp"
	"slices"
	"sync/atomic"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/internal/layout"
)

// This file holds what a client says of its hosts: the counterpart of
// the server's observers (observe.go), read on demand from counters the
// client keeps anyway.

// ioCounts are a host's frame and byte counters: the reader's pair added
// once per read batch, bytesOut once per write, on a line of their own.
type ioCounts struct {
	_                 [layout.CacheLine]byte
	framesIn, bytesIn atomic.Uint64 // written by the reader
	bytesOut          atomic.Uint64 // written by the writer
	_                 [layout.CacheLine - 24]byte
}

// HostStats is what a client knows of one host (Client.Hosts).
type HostStats struct {
	Addr string
	Up   bool
	// Connections counts the connections established to it,
	// ConnectFailures the attempts that failed; LastError says why the
	// last attempt or connection failed ("" if none did).
	Connections, ConnectFailures uint64
	LastError                    string
	// Pending is the roots sent to it whose outcome has not come back.
	Pending int
	// FramesIn and BytesIn count what its connections read; FramesOut the
	// frames handed to them, BytesOut the bytes written.
	FramesIn, BytesIn, FramesOut, BytesOut uint64
	// Outcomes it delivered: Completed and Failed by reason (explicit,
	// timeout, full, stopped, lost), and the stale ones dropped.
	Completed, FailedExplicit, FailedTimeout, FailedFull, FailedStopped, Lost, Stale uint64
}

// Hosts returns each host's counters, in the order of ClientConfig.Hosts.
func (c *Client) Hosts() []HostStats {
	hs := make([]HostStats, len(c.hosts))
	for i, h := range c.hosts {
		st := HostStats{Addr: h.addr, Up: h.up.Load(), Connections: h.conns.Load(), ConnectFailures: h.fails.Load(),
			FramesIn: h.io.framesIn.Load(), BytesIn: h.io.bytesIn.Load(), BytesOut: h.io.bytesOut.Load(),
			Completed: h.cnt.completed.Load(), FailedExplicit: h.cnt.explicit.Load(), FailedTimeout: h.cnt.timeout.Load(),
			FailedFull: h.cnt.full.Load(), FailedStopped: h.cnt.stopped.Load(), Lost: h.cnt.lost.Load(), Stale: h.cnt.stale.Load()}
		h.mu.Lock()
		st.FramesOut, st.LastError = h.framesOut, h.lastErr
		h.mu.Unlock()
		h.pendMu.Lock()
		st.Pending = h.pend.n
		h.pendMu.Unlock()
		hs[i] = st
	}
	return hs
}

func (h *host) setLastErr(s string) {
	h.mu.Lock()
	h.lastErr = s
	h.mu.Unlock()
}

// OldestPending returns up to n roots in flight, oldest first, from the
// hosts' pending tables: what this client sent and is still waiting for,
// each with its local (Spec) task and its age since its INIT was written
// (to the millisecond). Deadline is 0 in every entry: the timeout is kept
// by the server's acker, not by the client. It scans every table under
// its lock (a diagnostic, not a hot path). It has the in-process acker's
// signature, so an engine's status page shows a remote acker's oldest
// roots as it shows a local one's. The servers' own view (their acker's
// deadlines, roots of other clients) is their admin endpoint's /pending:
// the wire protocol has no frame to ask for it, and one is not worth a
// protocol version.
func (c *Client) OldestPending(n int) []ackcore.PendingRoot {
	if n <= 0 {
		return nil
	}
	now := time.Since(c.epoch)
	var all []ackcore.PendingRoot
	for _, h := range c.hosts {
		h.pendMu.Lock()
		h.pend.each(func(root, v uint64) {
			all = append(all, ackcore.PendingRoot{Root: root, Task: uint32(v & pendTaskMask),
				Age: now - time.Duration(v>>pendMsShift)*time.Millisecond})
		})
		h.pendMu.Unlock()
	}
	slices.SortStableFunc(all, func(x, y ackcore.PendingRoot) int { return cmp.Compare(y.Age, x.Age) })
	return all[:min(n, len(all))]
}
