package bench

import (
	"errors"
	"fmt"
	"strings"

	"github.com/xorack/xorack/ackcore"
)

// ErrVerification is wrapped by every error of a run whose outcomes do not
// match its workload.
var ErrVerification = errors.New("verification failed")

// expectation is what the workload emitted: roots (INITs), and of them the
// trees it failed explicitly and those it dropped an ACK of.
type expectation struct {
	roots, injFail, injDrop uint64
}

// check is what verify compares with an expectation.
type check struct {
	exp expectation
	got tally
	// silentTimeouts are roots the acker dropped at timeout without an
	// outcome (Storm's acker: the spout times them out on its own).
	silentTimeouts uint64
	// pendingLeft is the acker's pending entries after the drain; checked
	// when checkPending.
	pendingLeft  int
	checkPending bool
	// stats, for impls with exact counters, must agree with got.
	stats *ackcore.Stats
}

// verify returns nil when every emitted root got exactly the outcome the
// workload implies: completed unless injected, Failed{explicit} for the
// failed trees, a timeout for the dropped ones, nothing else. The error
// lists every mismatch and wraps ErrVerification.
func verify(c check) error {
	var bad []string
	f := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	g := &c.got
	timeouts := g.timedOut() + c.silentTimeouts
	wantDone := c.exp.roots - c.exp.injFail - c.exp.injDrop
	if n := g.completed() + g.failed() + c.silentTimeouts; n != c.exp.roots {
		f("%d roots emitted but %d outcomes (completed %d, failed %d, dropped silently %d)",
			c.exp.roots, n, g.completed(), g.failed(), c.silentTimeouts)
	}
	if g.completed() != wantDone {
		f("completed %d, want %d", g.completed(), wantDone)
	}
	if g.explicit() != c.exp.injFail {
		f("explicit failures %d, injected %d", g.explicit(), c.exp.injFail)
	}
	if timeouts != c.exp.injDrop {
		f("timeouts %d, injected drops %d", timeouts, c.exp.injDrop)
	}
	if other := g.failed() - g.explicit() - g.timedOut(); other != 0 {
		f("%d roots failed for other reasons (full %d, stopped %d, invalid %d)", other,
			g.n[ackcore.Failed][ackcore.ReasonFull], g.n[ackcore.Failed][ackcore.ReasonStopped],
			g.n[ackcore.Failed][ackcore.ReasonInvalid])
	}
	if n := g.refused(); n != 0 {
		f("%d messages refused (full %d, invalid %d)", n,
			g.n[ackcore.Refused][ackcore.ReasonFull], g.n[ackcore.Refused][ackcore.ReasonInvalid])
	}
	if n := g.sum(0); n != 0 {
		f("%d outcomes of no kind", n)
	}
	if c.checkPending && c.pendingLeft != 0 {
		f("%d entries still pending after the drain", c.pendingLeft)
	}
	if s := c.stats; s != nil {
		if s.Completed != g.completed() || s.FailedExplicit != g.explicit() || s.FailedTimeout != g.timedOut() {
			f("acker counters (completed %d, explicit %d, timeout %d) disagree with the outcomes delivered (%d, %d, %d)",
				s.Completed, s.FailedExplicit, s.FailedTimeout, g.completed(), g.explicit(), g.timedOut())
		}
		if s.FailedStopped != 0 {
			f("%d roots still pending when the acker stopped", s.FailedStopped)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &verifyError{strings.Join(bad, "; ")}
}

// verifyError lists what did not match; it wraps ErrVerification.
type verifyError struct{ detail string }

func (e *verifyError) Error() string { return ErrVerification.Error() + ": " + e.detail }
func (e *verifyError) Unwrap() error { return ErrVerification }

// detail is what a row records of a verification error: the mismatches
// alone when err came from verify.
func detail(err error) string {
	if ve, ok := err.(*verifyError); ok {
		return ve.detail
	}
	return err.Error()
}
