package main

import (
	"testing"

	"github.com/xorack/xorack/examples/internal/kit/kittest"
)

func TestRun(t *testing.T) {
	kittest.Run(t, run,
		kittest.Case{Args: []string{"-sentences", "500", "-fail", "0"}, Want: []string{"duplicates: 0 ", "counts by distinct id equal the sentences'"}},
		kittest.Case{Args: []string{"-sentences", "500", "-fail", "0.1"}, Want: []string{`every expected word is in "words"`}},
		kittest.Case{Args: []string{"-fail", "2", "-partitions", "2000"}, Code: 2, Want: []string{"kafka-pipeline: -fail 2: want a fraction in [0, 1); -partitions 2000: want 1 to 1024\n"}},
	)
}
