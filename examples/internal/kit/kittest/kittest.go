// Package kittest runs an example's command line in its tests: each case
// a command line, the exit code it must give and the text its output
// must hold.
package kittest

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// Case is one command line and what its run must give.
type Case struct {
	Args []string
	Code int      // the exit code
	Want []string // texts the output (stdout, then stderr) must each contain
}

// Run runs main on each case and reports, with the output, each one that
// exits with another code or lacks a wanted text.
func Run(t testing.TB, main func(args []string, stdout, stderr io.Writer) int, cases ...Case) {
	t.Helper()
	for _, c := range cases {
		var out, errw bytes.Buffer
		code := main(c.Args, &out, &errw)
		all := out.String() + errw.String()
		ok := code == c.Code
		for _, w := range c.Want {
			ok = ok && strings.Contains(all, w)
		}
		if !ok {
			t.Errorf("%q: exit %d, want %d and an output with %q:\n%s", c.Args, code, c.Code, c.Want, all)
		}
	}
}
