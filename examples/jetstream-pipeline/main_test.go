package main

import (
	"testing"

	"github.com/xorack/xorack/examples/internal/kit/kittest"
)

func TestRun(t *testing.T) {
	kittest.Run(t, run,
		kittest.Case{Args: []string{"-sentences", "500", "-fail", "0"}, Want: []string{"duplicates: 0 ", "every expected word is in OUT exactly once"}},
		kittest.Case{Args: []string{"-sentences", "500", "-fail", "0.2"}, Want: []string{"duplicates: 0 "}},
		kittest.Case{Args: []string{"-fail", "2"}, Code: 2, Want: []string{"jetstream-pipeline: -fail 2: want a fraction in [0, 1)\n"}},
	)
}
