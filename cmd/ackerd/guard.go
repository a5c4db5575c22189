package main

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// What keeps the admin endpoint from costing the acker anything a
// requester controls: a bound on its connections (limitListener), on how
// long one may stay (the http.Server's timeouts), on how often a request
// does work (gate), on how long a profile runs (capSeconds), and on who
// may ask at all (a loopback bind unless -admin-public, and the Host
// header checked on it: a page elsewhere cannot use a browser's DNS
// rebinding to read it). The table scans behind /pending and the page
// come from a snapshot (pendingScans).

// Bounds of the admin endpoint.
const (
	// maxAdminConns bounds the admin connections open at once; more wait
	// in the kernel's accept queue, holding no descriptor of ackerd's, so
	// however many an admin client opens the acker's own listener still
	// accepts. Far more than scrapers and operators open.
	maxAdminConns = 32
	// adminIdleTimeout closes a keep-alive admin connection idle this
	// long, so idle ones give their slots up; adminReadTimeout bounds
	// reading a request. Prometheus reconnects per scrape anyway.
	adminIdleTimeout = 5 * time.Second
	adminReadTimeout = 10 * time.Second
	// maxProfileSeconds caps /debug/pprof/profile and trace's seconds=;
	// adminWriteTimeout bounds writing a response, a capped profile
	// included.
	maxProfileSeconds = 30
	adminWriteTimeout = (maxProfileSeconds + 10) * time.Second
	// adminRate is the most requests a second the admin endpoint serves
	// past /healthz and /readyz, all requesters together; a request
	// waits at most adminMaxWait for its turn, else gets 503. Scrapes
	// come every few seconds and the page reloads every 2 s; a crowd of
	// requesters gets this many answers, not more work.
	adminRate    = 50
	adminMaxWait = time.Second
)

// newAdminServer is the admin endpoint's http.Server.
func newAdminServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: adminReadTimeout, ReadTimeout: adminReadTimeout,
		WriteTimeout: adminWriteTimeout, IdleTimeout: adminIdleTimeout, MaxHeaderBytes: 16 << 10}
}

// limitListener accepts at most n connections open at once: Accept waits
// for one to close first.
type limitListener struct {
	net.Listener
	sem  chan struct{}
	once sync.Once
	done chan struct{}
}

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its slot back once, at its first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// gate paces the requests it wraps: one every 1/adminRate s, a request
// waiting its turn at most adminMaxWait (503 past it), or until its
// client goes.
type gate struct {
	mu    sync.Mutex
	next  time.Time // guarded by mu: the next free turn
	every time.Duration
}

func newGate(perSec int) *gate { return &gate{every: time.Second / time.Duration(perSec)} }

func (g *gate) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		g.mu.Lock()
		turn := later(g.next, now)
		if wait := turn.Sub(now); wait > adminMaxWait {
			g.mu.Unlock()
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("ackerd: admin endpoint busy: it serves %d requests a second; try again", adminRate), http.StatusServiceUnavailable)
			return
		}
		g.next = turn.Add(g.every)
		g.mu.Unlock()
		if wait := turn.Sub(now); wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// hostCheck refuses requests whose Host header is not a loopback name:
// on a loopback bind, a request naming another host came through a
// browser that resolved that name to 127.0.0.1 for a page elsewhere (DNS
// rebinding).
func hostCheck(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			http.Error(w, fmt.Sprintf("ackerd: Host %q: the admin endpoint listens on loopback and answers only localhost, 127.0.0.1 or [::1]", r.Host), http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names this machine's
// loopback: localhost or a loopback address, with or without a port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// capSeconds refuses a profile or trace longer than maxProfileSeconds
// (or a seconds= that is not a positive number).
func capSeconds(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s := r.URL.Query().Get("seconds"); s != "" {
			if v, err := strconv.ParseFloat(s, 64); err != nil || !(v > 0 && v <= maxProfileSeconds) {
				http.Error(w, fmt.Sprintf("ackerd: seconds=%q: want a number in (0, %d]", s, maxProfileSeconds), http.StatusBadRequest)
				return
			}
		}
		h(w, r)
	}
}

// isLoopback reports whether a listener's address is a loopback one (not
// every interface, not another address).
func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
