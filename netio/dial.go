package netio

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"time"
)

// run is the host's connection manager: connect, serve until the
// connection ends, fail what was pending, back off, again, until Stop.
func (h *host) run(first chan<- error) {
	c := h.c
	defer c.wg.Done()
	backoff := c.cfg.BackoffMin
	reported := false
	dialed := time.Now()
	for !c.closed.Load() {
		conn, fr, w, err := h.connect()
		if err != nil {
			h.fails.Add(1)
			h.setLastErr("cannot connect: " + err.Error())
			if !reported && busy(err) && time.Since(dialed) < c.cfg.DialTimeout {
				// The server was busy (at MaxConns, or it dropped this
				// handshake for a newer one), or a task is still owned
				// by a connection it has not yet seen close: Dial tries
				// again within its dial timeout rather than fail at once.
				select {
				case <-time.After(c.cfg.BackoffMin):
				case <-c.stopped:
					return
				}
				continue
			}
			if !reported {
				first <- &HostError{Addr: h.addr, Err: err}
				reported = true
			}
			h.warn("netio: cannot connect", "reason", err.Error(), "retry_in", backoff)
			// Jitter in [backoff/2, backoff): clients that lost a host
			// together do not come back together.
			d := backoff/2 + time.Duration(rand.Int64N(int64(backoff/2)+1))
			select {
			case <-time.After(d):
			case <-c.stopped:
				return
			}
			backoff = min(2*backoff, c.cfg.BackoffMax)
			continue
		}
		c.conns.Add(1)
		h.conns.Add(1)
		since := time.Now()
		reason := h.serve(conn, fr, w, func() {
			// Dial returns once the host is routable, not merely
			// connected: a Send right after it must find it up.
			if !reported {
				first <- nil
				reported = true
			}
		})
		if time.Since(since) > c.cfg.BackoffMax {
			backoff = c.cfg.BackoffMin
		}
		if !c.closed.Load() {
			h.setLastErr("lost: " + reason)
			h.warn("netio: host lost", "reason", reason)
		}
	}
}

// warn logs a warning about the host, at most once per c.logEvery (the
// default logger); the next one logged counts those held back. Called by
// run only, which owns logNext and logHeld.
func (h *host) warn(msg string, args ...any) {
	c := h.c
	if c.logEvery > 0 {
		now := time.Now()
		if now.Before(h.logNext) {
			h.logHeld++
			return
		}
		h.logNext = now.Add(c.logEvery)
		if h.logHeld > 0 {
			args = append(args, "held_back", h.logHeld)
			h.logHeld = 0
		}
	}
	c.log.Warn(msg, append([]any{"host", h.addr}, args...)...)
}

// connect dials and handshakes.
func (h *host) connect() (net.Conn, *frameReader, welcomeBody, error) {
	c := h.c
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.DialTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	d := net.Dialer{}
	conn, err := d.DialContext(ctx, "tcp", h.addr)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			err = oe.Err // "connect: connection refused"; the address is the HostError's
		}
		return nil, nil, welcomeBody{}, err
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	fail := func(err error) (net.Conn, *frameReader, welcomeBody, error) {
		conn.Close()
		return nil, nil, welcomeBody{}, err
	}
	nc := conn
	if c.cfg.TLS != nil {
		tc := c.cfg.TLS.Clone()
		if tc.ServerName == "" {
			host, _, _ := net.SplitHostPort(h.addr)
			tc.ServerName = host
		}
		t := tls.Client(conn, tc)
		if err := t.HandshakeContext(ctx); err != nil {
			return fail(fmt.Errorf("TLS handshake: %w", err))
		}
		nc = t
	}
	fr := newFrameReader(nc, handshakeMaxFrame)
	f, err := handshakeFrame(fr, typeChallenge, "challenge", "connection refused")
	if err != nil {
		return fail(err)
	}
	ch, err := decodeChallenge(f.Body)
	if err != nil {
		return fail(unprefixed(err))
	}
	if uint64(c.cfg.TaskBase)+uint64(c.spec.Tasks) > uint64(ch.Tasks) {
		return fail(fmt.Errorf("serves tasks [0, %d), this client owns [%d, %d)", ch.Tasks,
			c.cfg.TaskBase, uint64(c.cfg.TaskBase)+uint64(c.spec.Tasks)))
	}
	if need := headerSize + c.frame*msgSize; need > int(ch.MaxFrame) {
		return fail(fmt.Errorf("accepts frames of %d bytes, FrameMsgs %d needs %d", ch.MaxFrame, c.frame, need))
	}
	hello := helloBody{ClientID: c.cfg.ID, MaxFrame: uint32(c.cfg.MaxFrame),
		Tasks: []taskRange{{First: c.cfg.TaskBase, Count: uint32(c.spec.Tasks)}}}
	hello.MAC = helloMAC(c.cfg.Secret, &ch.Nonce, &hello)
	if _, err := nc.Write(appendHello(nil, &hello)); err != nil {
		return fail(fmt.Errorf("writing hello: %w", err))
	}
	if f, err = handshakeFrame(fr, typeWelcome, "welcome", "handshake refused"); err != nil {
		return fail(err)
	}
	w, err := decodeWelcome(f.Body)
	if err != nil {
		return fail(unprefixed(err))
	}
	_ = conn.SetDeadline(time.Time{})
	fr.SetLimit(c.cfg.MaxFrame)
	if t, ok := nc.(*tls.Conn); ok {
		return t, fr, w, nil
	}
	return conn, fr, w, nil
}

// unprefixed drops the "netio: " of an error that goes into a HostError,
// itself inside a ConnectError that says "netio: " once.
func unprefixed(err error) error {
	if s, ok := strings.CutPrefix(err.Error(), "netio: "); ok {
		return &prefixless{s, err}
	}
	return err
}

type prefixless struct {
	s   string
	err error
}

func (p *prefixless) Error() string { return p.s }

func (p *prefixless) Unwrap() error { return p.err }

// handshakeFrame reads the server's next handshake frame, which must be of
// type want (named what): a close frame is the server's refusal, with its
// code and reason, said as refused ("connection refused", "handshake
// refused"); any other type is a protocol error.
func handshakeFrame(fr *frameReader, want uint8, what, refused string) (wireFrame, error) {
	f, err := fr.Next()
	if err != nil {
		return f, fmt.Errorf("reading %s: %w", what, unprefixed(err))
	}
	if f.Type == typeClose {
		code, reason, _ := decodeClose(f.Body)
		return f, &refusedError{code: code, text: fmt.Sprintf("%s (%s, code %s)", reason, refused, closeCodeName(code))}
	}
	if f.Type != want {
		return f, fmt.Errorf("sent %s, want %s", typeName(f.Type), what)
	}
	return f, nil
}
