package ackcore

import (
	"strings"
	"testing"
)

// TestReasonNames: every reason has its own name, one lower-case word,
// since metric labels, logs and dead-letter headers print String as is.
func TestReasonNames(t *testing.T) {
	seen := map[string]Reason{}
	for r := ReasonNone; r <= ReasonPanic; r++ {
		s := r.String()
		if s == "" || strings.ToLower(s) != s || strings.ContainsAny(s, " _-()") {
			t.Errorf("Reason %d: name %q, want one lower-case word", uint8(r), s)
		}
		if o, dup := seen[s]; dup {
			t.Errorf("reasons %d and %d are both named %q", uint8(o), uint8(r), s)
		}
		seen[s] = r
	}
	if got := (ReasonPanic + 1).String(); got != "Reason(8)" {
		t.Errorf("unknown reason prints %q, want Reason(8)", got)
	}
}

// TestKindNames: the message and outcome kinds print their names, and a
// value with none (the zero kind, one past the last) its type and number.
func TestKindNames(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{Init.String(), "INIT"}, {Ack.String(), "ACK"}, {Fail.String(), "FAIL"}, {Reset.String(), "RESET"},
		{Kind(0).String(), "Kind(0)"}, {(Reset + 1).String(), "Kind(5)"},
		{Completed.String(), "completed"}, {Failed.String(), "failed"}, {Refused.String(), "refused"},
		{OutcomeKind(0).String(), "OutcomeKind(0)"}, {(Refused + 1).String(), "OutcomeKind(4)"},
	} {
		if c.got != c.want {
			t.Errorf("String() = %q, want %q", c.got, c.want)
		}
	}
}
