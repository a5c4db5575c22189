package testkit

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xorack/xorack/internal/invariants"
	"github.com/xorack/xorack/internal/race"
)

// recorder is a testing.TB that keeps what Errorf and Skip say.
type recorder struct {
	testing.TB
	errs    []string
	skipped []any
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Skip(args ...any)  { r.skipped = args }
func (r *recorder) Fatal(args ...any) { r.errs = append(r.errs, fmt.Sprint(args...)) }

// starter counts its Starts and returns err from them.
type starter struct {
	starts int
	err    error
}

func (s *starter) Start() error { s.starts++; return s.err }

// TestStarted: Start runs only when the maker succeeded; either error
// fails the test with it.
func TestStarted(t *testing.T) {
	made, refused := errors.New("not made"), errors.New("not started")
	for _, tc := range []struct {
		makeErr, startErr error
		starts            int
		fatal             string
	}{
		{nil, nil, 1, ""},
		{made, nil, 0, "not made"},
		{nil, refused, 1, "not started"},
	} {
		r := &recorder{TB: t}
		s := &starter{err: tc.startErr}
		if got := Started(r, s, tc.makeErr); got != s || s.starts != tc.starts || strings.Join(r.errs, "; ") != tc.fatal {
			t.Errorf("%v, %v: starts %d, fatal %q; want %d, %q", tc.makeErr, tc.startErr, s.starts, r.errs, tc.starts, tc.fatal)
		}
	}
}

func TestClosedAddrRefuses(t *testing.T) {
	addr := ClosedAddr(t)
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("dial %s connected", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
}

type cfg struct{ n int }

func (c cfg) check() error {
	if c.n < 0 {
		return fmt.Errorf("pkg: cfg.n %d below 0", c.n)
	}
	return nil
}

// TestRefuses: a refusal passes only with its error, whole or (with
// "...") its start, and each one that does not is reported.
func TestRefuses(t *testing.T) {
	neg := func(c *cfg) { c.n = -1 }
	for _, tc := range []struct {
		r    Refusal[cfg]
		errs int
	}{
		{Refusal[cfg]{neg, "pkg: cfg.n -1 below 0"}, 0},
		{Refusal[cfg]{neg, "pkg: cfg.n -1..."}, 0},
		{Refusal[cfg]{neg, "pkg: cfg.n -1"}, 1},                     // not the whole error
		{Refusal[cfg]{neg, "cfg.n -1..."}, 1},                       // not its start
		{Refusal[cfg]{func(c *cfg) { c.n = 1 }, "pkg: cfg.n 1"}, 1}, // accepted
	} {
		r := &recorder{TB: t}
		Refuses(r, cfg{}, cfg.check, []Refusal[cfg]{tc.r})
		if len(r.errs) != tc.errs {
			t.Errorf("%q: %d errors %q, want %d", tc.r.Want, len(r.errs), r.errs, tc.errs)
		}
	}
}

func TestSkipUnderInvariants(t *testing.T) {
	r := &recorder{TB: t}
	SkipUnderInvariants(r, "slow")
	if want := invariants.Enabled; (r.skipped != nil) != want || want && r.skipped[0] != "slow" {
		t.Fatalf("skipped %v in a build with invariants %v", r.skipped, invariants.Enabled)
	}
}

func TestSkipUnderRace(t *testing.T) {
	r := &recorder{TB: t}
	SkipUnderRace(r, "one goroutine")
	if want := race.Enabled; (r.skipped != nil) != want || want && r.skipped[0] != "one goroutine" {
		t.Fatalf("skipped %v in a build with the race detector %v", r.skipped, race.Enabled)
	}
}

// TestServe: each connection goes to the handler; with none, it is held
// open, unanswered, until the test ends.
func TestServe(t *testing.T) {
	addr := Serve(t, func(c net.Conn) {
		_, _ = c.Write([]byte("hi"))
		c.Close()
	})
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := io.ReadAll(c); err != nil || string(got) != "hi" {
		t.Fatalf("read %q, %v; want \"hi\" then EOF", got, err)
	}

	held, err := net.DialTimeout("tcp", Serve(t, nil), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := held.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n, err := held.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on a held connection: %d bytes, %v; want the deadline", n, err)
	}
}

// TestLogs: records are kept in order with their attributes, through a
// logger's With too.
func TestLogs(t *testing.T) {
	h := &Logs{}
	l := slog.New(h)
	l.Warn("one", "k", 1)
	l.With("dropped", true).Info("two")
	recs := h.Records()
	if len(recs) != 2 || recs[0].Message != "one" || recs[0].Level != slog.LevelWarn || recs[1].Message != "two" {
		t.Fatalf("records %v", recs)
	}
	var k slog.Value
	recs[0].Attrs(func(a slog.Attr) bool { k = a.Value; return a.Key != "k" })
	if k.Int64() != 1 || recs[1].NumAttrs() != 0 {
		t.Fatalf("attributes: k=%v, the second record has %d", k, recs[1].NumAttrs())
	}
}
