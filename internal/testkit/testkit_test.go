package testkit

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/xorack/xorack/internal/invariants"
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
func (r *recorder) Skip(args ...any) { r.skipped = args }

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
