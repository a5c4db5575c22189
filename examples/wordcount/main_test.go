package main

import (
	"strings"
	"testing"

	"github.com/xorack/xorack/examples/internal/kit/kittest"
)

func TestWordcount(t *testing.T) {
	kittest.Run(t, run,
		kittest.Case{Args: []string{"-sentences", "2000"}, Want: []string{"words counted 13250, in the sentences 13250 (+0", "every sentence completed"}},
		kittest.Case{Args: []string{"-sentences", "2000", "-fail", "0.05", "-drop", "0.02", "-timeout", "200ms"}, Want: []string{"sentences: completed 2000,"}},
		kittest.Case{Args: []string{"-sentences", "2000", "-ackers", "0"}, Want: []string{"at most once"}},
		kittest.Case{Args: []string{"-sentences", "2000", "-fail", "0.5", "-attempts", "1"}, Code: 1, Want: []string{"dead-lettered"}},
		kittest.Case{Args: []string{"-fail", "2"}, Code: 2},
	)
}

// TestBadFlags: a bad flag value exits 2 naming that flag, its value and
// its rule, and only the flags that are wrong.
func TestBadFlags(t *testing.T) {
	for args, want := range map[string]string{
		"-fail 1.5":            "wordcount: -fail 1.5: want a fraction in [0, 1)\n",
		"-drop -0.1":           "wordcount: -drop -0.1: want a fraction in [0, 1)\n",
		"-sentences 0":         "wordcount: -sentences 0: want at least 1\n",
		"-split 0 -count 0":    "wordcount: -split 0: want at least 1 task; -count 0: want at least 1 task\n",
		"-count -3 -fail 0.05": "wordcount: -count -3: want at least 1 task\n",
	} {
		var out, errb strings.Builder
		if code := run(strings.Fields(args), &out, &errb); code != 2 || errb.String() != want {
			t.Errorf("%s: exit %d, stderr %q; want 2, %q", args, code, errb.String(), want)
		}
	}
}
