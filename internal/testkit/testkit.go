// Package testkit holds the small helpers that the tests of several
// packages and modules share: an address nothing listens on, the table
// check of a config's refusals, and the skip of a test too slow for the
// invariant build. It imports package testing and belongs in _test.go
// files only.
package testkit

import (
	"net"
	"strings"
	"testing"

	"github.com/xorack/xorack/internal/invariants"
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

// SkipUnderInvariants skips the test in the invariant build (-tags
// invariants), with why as the reason.
func SkipUnderInvariants(t testing.TB, why string) {
	t.Helper()
	if invariants.Enabled {
		t.Skip(why)
	}
}
