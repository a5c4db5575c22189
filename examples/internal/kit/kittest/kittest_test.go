package kittest

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what Errorf reports.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestRun: a case passes only with its code and every wanted text, found
// in stdout or stderr.
func TestRun(t *testing.T) {
	main := func(args []string, stdout, stderr io.Writer) int {
		fmt.Fprintln(stdout, "out:", strings.Join(args, " "))
		fmt.Fprintln(stderr, "err")
		return len(args)
	}
	r := &recorder{TB: t}
	Run(r, main,
		Case{Args: []string{"a"}, Code: 1, Want: []string{"out: a", "err"}}, // passes
		Case{Args: []string{"a"}, Code: 0},                                  // the code
		Case{Args: nil, Code: 0, Want: []string{"out:", "missing"}},         // a text
	)
	if len(r.errs) != 2 || !strings.Contains(r.errs[0], "exit 1, want 0") || !strings.Contains(r.errs[1], `"missing"`) {
		t.Errorf("Run reported %q", r.errs)
	}
}
