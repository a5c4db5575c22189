// Package testkit holds the small helpers that the tests of several
// packages and modules share: an address nothing listens on, a loopback
// server that does one thing with each connection, a log handler that
// keeps what it is given, the table check of a config's refusals, the
// start of what a test just made (Started), the skip of a test too slow
// for the invariant build, the skip under the race detector of a test
// that runs on one goroutine, and a test's size, cut under -short (Size).
// It imports package testing and belongs in _test.go files only.
package testkit

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/xorack/xorack/internal/invariants"
	"github.com/xorack/xorack/internal/race"
)

// ClosedAddr returns an address on 127.0.0.1 where nothing listens: a
// port the kernel handed out and that was closed again, so that a dial to
// it is refused.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Serve listens on a port of 127.0.0.1 and hands each connection it
// accepts to handle, on the accepting goroutine, until the test ends; then
// it closes the listener and every connection it accepted, and waits for
// the goroutine. It returns the address. With a nil handle, a connection
// is held open and never answered.
func Serve(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			if handle != nil {
				handle(c)
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// Logs is a slog.Handler that keeps every record it is given, for a test
// to read while the code under test logs. Attributes and groups given to
// WithAttrs and WithGroup are dropped: a record keeps its own. The zero
// Logs is ready; it is safe for concurrent use.
type Logs struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *Logs) Enabled(context.Context, slog.Level) bool { return true }

func (h *Logs) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r.Clone())
	h.mu.Unlock()
	return nil
}

func (h *Logs) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *Logs) WithGroup(string) slog.Handler { return h }

// Records returns the records kept so far, oldest first.
func (h *Logs) Records() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.recs)
}

// Refusal is an edit of a valid config and the error it must bring: the
// whole error, or its start when Want ends in "...".
type Refusal[C any] struct {
	Edit func(*C)
	Want string
}

// Refuses applies each refusal's edit to a copy of good and checks that
// check refuses the result with the refusal's error.
func Refuses[C any](t testing.TB, good C, check func(C) error, refusals []Refusal[C]) {
	t.Helper()
	for _, r := range refusals {
		bad := good
		r.Edit(&bad)
		err := check(bad)
		if err == nil {
			t.Errorf("accepted, want %q", r.Want)
			continue
		}
		if start, ok := strings.CutSuffix(r.Want, "..."); ok && !strings.HasPrefix(err.Error(), start) || !ok && err.Error() != r.Want {
			t.Errorf("got %q, want %q", err, r.Want)
		}
	}
}

// Started starts s, just made (err is the maker's error), and returns it,
// failing the test if either the maker or Start refused: for an acker
// from acker.New, a topology from Builder.Build.
func Started[S interface{ Start() error }](t testing.TB, s S, err error) S {
	t.Helper()
	if err == nil {
		err = s.Start()
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// SkipUnderInvariants skips the test in the invariant build (-tags
// invariants), with why as the reason.
func SkipUnderInvariants(t testing.TB, why string) {
	t.Helper()
	if invariants.Enabled {
		t.Skip(why)
	}
}

// SkipUnderRace skips, in a build with the race detector, a test that
// runs on its own goroutine alone (nothing it calls starts another): the
// detector reports races between goroutines, so there it only costs
// time, and the build without it runs the test in full. why says so.
func SkipUnderRace(t testing.TB, why string) {
	t.Helper()
	if race.Enabled {
		t.Skip(why)
	}
}

// SizeUnderInvariants is n, or checked in the invariant build (-tags
// invariants), where every step of a shard checks its whole table: how big
// a test's tables are, cut down where each of their slots costs a step.
func SizeUnderInvariants(n, checked int) int {
	if invariants.Enabled {
		return checked
	}
	return n
}

// Size is n, or short under -short: how much a test does, cut down for
// the short run.
func Size(n, short int) int {
	if testing.Short() {
		return short
	}
	return n
}
