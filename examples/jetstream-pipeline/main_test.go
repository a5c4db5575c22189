package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"-sentences", "500", "-fail", "0"}, "duplicates: 0 ", 0},
		{[]string{"-sentences", "500", "-fail", "0.2"}, "duplicates: 0 ", 0},
		{[]string{"-fail", "2"}, "", 2},
	} {
		var out, errw bytes.Buffer
		code := run(tc.args, &out, &errw)
		if code != tc.code || !strings.Contains(out.String()+errw.String(), tc.want) {
			t.Errorf("%v: exit %d (want %d)\n%s%s", tc.args, code, tc.code, out.String(), errw.String())
		}
	}
}
