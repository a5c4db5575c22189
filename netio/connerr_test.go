package netio

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xorack/xorack/ackcore"
	"github.com/xorack/xorack/acker"
	"github.com/xorack/xorack/internal/testkit"
)

var oneTask = acker.Spec{Producers: 1, Tasks: 1}

// TestDialErrorSaysWhy: Dial's error carries each host's reason, in its
// own words, and Port's error comes with a nil interface.
func TestDialErrorSaysWhy(t *testing.T) {
	s := startServer(t, nil)
	ca := newCA(t)
	tlsSrv := startServer(t, func(c *ServerConfig) {
		c.TLS = &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "server", x509.ExtKeyUsageServerAuth)}, MinVersion: tls.VersionTLS13}
	})
	// A server of another protocol version: its first frame says 2.
	other := testkit.Serve(t, func(c net.Conn) {
		ch := appendChallenge(nil, &challengeBody{MaxFrame: DefaultMaxFrame, Tasks: 64})
		ch[offVersion] = protoVersion + 1
		_, _ = c.Write(ch)
		c.Close()
	})
	refused := testkit.ClosedAddr(t)

	wrongSecret := clientCfg(s.addr)
	wrongSecret.Secret = []byte("not-the-secret-0123456789")
	otherCA := newCA(t)
	badTLS := clientCfg(tlsSrv.addr)
	badTLS.TLS = &tls.Config{RootCAs: otherCA.pool}
	for _, tc := range []struct {
		name string
		cfg  ClientConfig
		want string // the whole error, or its start when it ends in "..."
		is   error
	}{
		{"refused", clientCfg(refused), "netio: could not connect to any of 1 hosts: " + refused + ": connect: connection refused", syscall.ECONNREFUSED},
		{"wrong secret", wrongSecret, "netio: could not connect to any of 1 hosts: " + s.addr + ": hello MAC does not match (handshake refused, code auth)", nil},
		{"tls", badTLS, "netio: could not connect to any of 1 hosts: " + tlsSrv.addr + ": TLS handshake: tls: failed to verify certificate: x509: certificate signed by unknown authority...", nil},
		{"version", clientCfg(other), "netio: could not connect to any of 1 hosts: " + other + ": reading challenge: frame version 2, this side speaks 1", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.cfg.Port(oneTask)
			if err == nil {
				p.Stop()
				t.Fatal("connected")
			}
			if p != nil {
				t.Fatalf("Port returned %#v with its error, want a nil interface", p)
			}
			if w, ok := strings.CutSuffix(tc.want, "..."); ok && !strings.HasPrefix(err.Error(), w) || !ok && err.Error() != tc.want {
				t.Fatalf("error\n%q\nwant\n%q", err, tc.want)
			}
			var he *HostError
			if !errors.As(err, &he) || he.Addr != tc.cfg.Hosts[0] {
				t.Fatalf("errors.As HostError: %v", he)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("errors.Is(%v, %v) is false", err, tc.is)
			}
		})
	}

	// Two hosts down: both reasons, in address order.
	both := clientCfg(refused, s.addr)
	both.Secret = wrongSecret.Secret
	_, err := Dial(both, oneTask)
	if err == nil || !strings.HasPrefix(err.Error(), "netio: could not connect to any of 2 hosts: ") ||
		!strings.Contains(err.Error(), refused+": connect: connection refused") ||
		!strings.Contains(err.Error(), s.addr+": hello MAC does not match") || strings.Count(err.Error(), "; ") != 1 {
		t.Fatalf("two hosts: %v", err)
	}
}

// TestDefaultLoggerRateLimits: with no Logger the client warns on
// slog.Default about a host that cannot connect once per logInterval,
// however often it retries, and says nothing about the host that
// connected.
func TestDefaultLoggerRateLimits(t *testing.T) {
	buf := &syncBuf{}
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(buf, nil)))
	defer slog.SetDefault(old)

	s := startServer(t, nil)
	refused := testkit.ClosedAddr(t)
	cfg := clientCfg(s.addr, refused)
	cfg.BackoffMin, cfg.BackoffMax = time.Millisecond, 2*time.Millisecond
	c := mustDial(t, cfg, oneTask)
	defer c.Stop()
	waitFor(t, 5*time.Second, "ten failed attempts", func() bool {
		_, cs := c.Stats()
		return cs.ConnectFailures >= 10
	})
	log := buf.String()
	if n := strings.Count(log, "host="+refused); n != 1 {
		t.Fatalf("%d warnings about %s after 10 failed attempts, want 1:\n%s", n, refused, log)
	}
	if !strings.Contains(log, "level=WARN msg=\"netio: cannot connect\" host="+refused+" reason=\"connect: connection refused\"") {
		t.Fatalf("warning does not say why:\n%s", log)
	}
	if strings.Contains(log, s.addr) {
		t.Fatalf("default logger logged the host that connected:\n%s", log)
	}
}

// TestFlushAfterStop: once the client is stopped, a Flush with nothing
// staged is no error (as the in-process acker's Producer: an engine that
// flushes on every pass does not count a stop as an acker error); one
// with messages staged says acker.ErrClosed and reports their INITs
// Failed{stopped}.
func TestFlushAfterStop(t *testing.T) {
	_, c := dialNew(t, acker.Spec{Producers: 2, Tasks: 1}, nil)
	p, staged := c.Sender(0), c.Sender(1)
	if err := staged.Send(ackcore.Msg{Root: 9, Kind: ackcore.Init, Val: 1}); err != nil {
		t.Fatal(err)
	}
	c.Stop()
	if err := p.Flush(); err != nil {
		t.Errorf("Flush of nothing after Stop: %v, want nil", err)
	}
	if err := staged.Flush(); !errors.Is(err, acker.ErrClosed) {
		t.Errorf("Flush of a staged INIT after Stop: %v, want acker.ErrClosed", err)
	}
	if err := p.Send(ackcore.Msg{Root: 10, Kind: ackcore.Ack, Val: 1}); !errors.Is(err, acker.ErrClosed) {
		t.Errorf("Send after Stop: %v, want acker.ErrClosed", err)
	}
}
