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
