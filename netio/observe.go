package netio

import (
	"crypto/tls"
	"errors"
	"strings"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
)

// This file holds what an operator's endpoint reads of a running server
// (cmd/ackerd's admin handler): counters the server keeps anyway, read at
// scrape time, nothing counted per message.

// HandshakeFailures counts the connections that failed the handshake,
// by cause (ServerStats.HandshakeFailures; they sum to HandshakeFails).
type HandshakeFailures struct {
	Auth       uint64 // hello MAC did not match (wrong secret)
	TLS        uint64 // the TLS handshake failed (no or a bad client certificate, plain TCP)
	Protocol   uint64 // a malformed or unexpected first frame
	Timeout    uint64 // no hello within HandshakeTimeout
	TaskOwned  uint64 // a claimed task belongs to another client
	Overloaded uint64 // MaxConns reached, or dropped for a newer handshake (MaxHandshakes)
	Gone       uint64 // the peer closed or reset the connection first, or another error
}

// Causes of handshake failure: indices into Server.hsCause.
const (
	hsAuth = iota
	hsTLS
	hsProtocol
	hsTimeout
	hsTaskOwned
	hsOverloaded
	hsGone
	hsCauses
)

// hsCauseOf classifies a handshake's error (serve, once per failure).
func hsCauseOf(err error) int {
	switch codeOf(err) {
	case closeAuth:
		return hsAuth
	case closeProtocol:
		return hsProtocol
	case closeIdle:
		return hsTimeout
	case closeTaskOwned:
		return hsTaskOwned
	case closeOverloaded:
		return hsOverloaded
	}
	var re tls.RecordHeaderError
	var ae tls.AlertError
	if errors.As(err, &re) || errors.As(err, &ae) || strings.HasPrefix(err.Error(), "netio: TLS handshake") {
		return hsTLS
	}
	return hsGone
}

func (s *Server) handshakeFailures() HandshakeFailures {
	c := &s.hsCause
	return HandshakeFailures{Auth: c[hsAuth].Load(), TLS: c[hsTLS].Load(), Protocol: c[hsProtocol].Load(),
		Timeout: c[hsTimeout].Load(), TaskOwned: c[hsTaskOwned].Load(), Overloaded: c[hsOverloaded].Load(), Gone: c[hsGone].Load()}
}

// ShardStats returns shard i's counters (at most a tick old while it
// runs), i in [0, Shards).
func (s *Server) ShardStats(i int) ackcore.Stats { return s.ak.ShardStats(i) }

// Shards is the acker's shard count.
func (s *Server) Shards() int { return s.cfg.Shards }

// Backlog returns the router's receiver counters: the outcomes waiting
// for the router in the shards' rings and held by the shards.
func (s *Server) Backlog() acker.ReceiverStats { return s.ak.Inbox(0).(*acker.Receiver).Stats() }

// OldestPending returns up to n of the acker's pending roots, oldest
// first (acker.Acker.OldestPending: each shard scans its table at its
// next tick, a diagnostic).
func (s *Server) OldestPending(n int) []ackcore.PendingRoot { return s.ak.OldestPending(n) }

// TaskOwner returns the client id and remote address of the connection
// owning spout task t, ok false when none does.
func (s *Server) TaskOwner(t uint32) (clientID uint64, remote string, ok bool) {
	if t >= uint32(len(s.owner)) {
		return 0, "", false
	}
	c := s.owner[t].Load()
	if c == nil {
		return 0, "", false
	}
	return c.id, c.tag, true
}

// Accepting reports whether the server listens and accepts connections:
// Serve has a listener and neither Shutdown nor Close began.
func (s *Server) Accepting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lns) > 0 && !s.closing
}
