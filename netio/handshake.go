package netio

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"
)

// The server's side of the handshake: the challenge, the hello checked,
// a producer slot and the tasks claimed (docs/semantics.md, netio rules 8
// and 11).

// handshake authenticates the client and claims its tasks. An error
// that should reach the client as a close frame is a *closeError (serve
// writes it, see reject).
func (c *sconn) handshake() error {
	s := c.s
	deadline := time.Now().Add(s.cfg.HandshakeTimeout)
	_ = c.raw.SetDeadline(deadline)
	if s.cfg.TLS != nil {
		tc := tls.Server(c.nc, s.cfg.TLS)
		if err := tc.Handshake(); err != nil {
			return fmt.Errorf("netio: TLS handshake: %w", err)
		}
		c.nc = tc
	}
	ch := challengeBody{MaxFrame: uint32(s.cfg.MaxFrame), Tasks: uint32(s.cfg.Tasks)}
	if _, err := rand.Read(ch.Nonce[:]); err != nil {
		return err
	}
	if _, err := c.nc.Write(appendChallenge(nil, &ch)); err != nil {
		return fmt.Errorf("netio: writing challenge: %w", err)
	}
	c.fr = newFrameReader(c.nc, handshakeMaxFrame)
	f, err := c.fr.Next()
	if err != nil {
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return &closeError{code: closeIdle, err: fmt.Errorf("netio: no hello within the handshake timeout %v", s.cfg.HandshakeTimeout)}
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed):
			return fmt.Errorf("netio: reading hello: %w", err)
		case errors.As(err, &ne):
			return fmt.Errorf("netio: reading hello: %w", err) // reset and the like: no one to tell
		}
		return &closeError{code: closeProtocol, err: fmt.Errorf("netio: reading hello: %w", err)}
	}
	if f.Type != typeHello {
		return &closeError{code: closeProtocol, err: fmt.Errorf("netio: first frame is %s, want hello", typeName(f.Type)), say: "expected hello"}
	}
	h, err := decodeHello(f.Body, uint32(s.cfg.Tasks))
	if err != nil {
		return &closeError{code: closeProtocol, err: err, say: "malformed hello"}
	}
	if err := checkHelloMAC(s.cfg.Secret, &ch.Nonce, &h); err != nil {
		// The client learns no more than that the MAC is wrong: the one
		// check there is, so naming it gives nothing away and says "wrong
		// secret" to whoever configured the client.
		return &closeError{code: closeAuth, err: err, say: "hello MAC does not match"}
	}
	c.id, c.tasks, c.limit = h.ClientID, h.Tasks, int(min(h.MaxFrame, 64<<20))
	if err := c.claim(); err != nil {
		return err
	}
	hb := s.cfg.IdleTimeout / 3
	w := welcomeBody{ServerID: s.id, Heartbeat: hb, Idle: s.cfg.IdleTimeout}
	if _, err := c.nc.Write(appendWelcome(nil, &w)); err != nil {
		c.release()
		return fmt.Errorf("netio: writing welcome: %w", err)
	}
	_ = c.raw.SetDeadline(time.Time{})
	c.fr.SetLimit(s.cfg.MaxFrame)
	s.log.Info("netio: client connected", "remote", c.tag, "client", clientID(c.id), "tasks", len(c.tasks))
	return nil
}

// clientID is a client id as the logs, the close reasons, ackerd's page
// and /pending write it: hex ("0x5eed"), one format everywhere.
type clientID uint64

func (id clientID) LogValue() slog.Value { return slog.StringValue(fmt.Sprintf("%#x", uint64(id))) }

// claim takes a producer slot for c and makes it the owner of its tasks.
// A task owned by a connection of another client is refused; one owned by
// an earlier connection of the same client is taken over (a reconnect the
// server has not noticed yet), and that connection is closed
// (closeReplaced).
func (c *sconn) claim() error {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return &closeError{code: closeShutdown, err: errors.New("netio: server shutting down")}
	}
	if c.dropped {
		return errors.New("netio: dropped from the handshake budget")
	}
	var replaced []*sconn
	n := 0
	for _, r := range c.tasks {
		for t := r.First; t < r.First+r.Count; t++ {
			n++
			if o := s.owner[t].Load(); o != nil && o != c && o.id != c.id {
				return &closeError{code: closeTaskOwned, err: fmt.Errorf("netio: client %#x claims task %d, owned by client %#x", c.id, t, o.id)}
			}
		}
	}
	select {
	case c.slot = <-s.slots:
	default:
		s.refused.Add(1)
		return &closeError{code: closeOverloaded, err: fmt.Errorf("netio: server at its connection limit (MaxConns %d)", s.cfg.MaxConns)}
	}
	s.pre.Remove(c.preElem)
	c.preElem = nil
	s.authed.Add(1)
	s.setOrphanShare()
	c.orphansBase = s.ak.OrphansRefused(c.slot)
	if n > 0 {
		c.owner = true
		s.addOwners(1)
		c.ownsTasks()
	}
	for _, r := range c.tasks {
		for t := r.First; t < r.First+r.Count; t++ {
			if o := s.owner[t].Swap(c); o != nil && o != c && (len(replaced) == 0 || replaced[len(replaced)-1] != o) {
				replaced = append(replaced, o)
			}
		}
	}
	for _, o := range replaced {
		s.log.Info("netio: connection replaced by a newer one of the same client", "remote", o.tag, "client", clientID(o.id))
		o.replace() // its reader ends, its writer says closeReplaced
	}
	return nil
}

// release gives up c's tasks (those still owned by c).
func (c *sconn) release() {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range c.tasks {
		for t := r.First; t < r.First+r.Count; t++ {
			s.owner[t].CompareAndSwap(c, nil)
		}
	}
}

// macLabel separates this protocol's MACs from any other use of the
// secret.
const macLabel = "xorack-netio-v1"

// helloMAC is the MAC a hello carries: HMAC-SHA256(secret, label || nonce
// || the signed part of the hello body).
func helloMAC(secret []byte, nonce *[nonceSize]byte, h *helloBody) [macSize]byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(macLabel))
	m.Write(nonce[:])
	m.Write(appendHelloSigned(nil, h))
	var out [macSize]byte
	copy(out[:], m.Sum(nil))
	return out
}

// checkHelloMAC compares h's MAC with the expected one in constant time.
func checkHelloMAC(secret []byte, nonce *[nonceSize]byte, h *helloBody) error {
	want := helloMAC(secret, nonce, h)
	if !hmac.Equal(want[:], h.MAC[:]) {
		return fmt.Errorf("netio: client %#x: hello MAC does not match (wrong secret)", h.ClientID)
	}
	return nil
}
