package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestWordcount(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"-sentences", "2000"}, "words counted 13250, in the sentences 13250 (+0", 0},
		{[]string{"-sentences", "2000", "-fail", "0.05", "-drop", "0.02", "-timeout", "200ms"}, "sentences: completed 2000,", 0},
		{[]string{"-sentences", "2000", "-ackers", "0"}, "at most once", 0},
		{[]string{"-sentences", "2000", "-fail", "0.5", "-attempts", "1"}, "dead-lettered", 1},
		{[]string{"-fail", "2"}, "", 2},
	} {
		var out, errw bytes.Buffer
		code := run(tc.args, &out, &errw)
		if code != tc.code || !strings.Contains(out.String()+errw.String(), tc.want) {
			t.Errorf("%v: exit %d (want %d)\n%s%s", tc.args, code, tc.code, out.String(), errw.String())
		}
	}
}
