package acker_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/xorack/xorack/ackcore"
)

// TestDefaultMaxBytesDoc: the figures ackcore's DefaultMaxBytes doc gives
// (the largest MaxPending its budget holds, in millions, and the bytes a
// root that Config.Bytes counts at that size) are what Config.Bytes
// computes now, to the digits the doc writes.
func TestDefaultMaxBytesDoc(t *testing.T) {
	src, err := os.ReadFile("../ackcore/config.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`enough for MaxPending ([0-9.]+) million at the worst case\s*//\s*Config.Bytes counts \(([0-9.]+) bytes a root`).FindSubmatch(src)
	if m == nil {
		t.Fatal("ackcore/config.go: DefaultMaxBytes' doc no longer says MaxPending N million at M bytes a root; update this test with it")
	}
	// The largest MaxPending whose worst case fits the budget.
	lo, hi := 1, ackcore.MaxPendingLimit
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if c := (ackcore.Config{MaxPending: mid}); c.Bytes() <= ackcore.DefaultMaxBytes {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	c := ackcore.Config{MaxPending: lo}
	millions := strconv.FormatFloat(float64(lo)/1e6, 'f', 2, 64)
	perRoot := strconv.FormatFloat(float64(c.Bytes())/float64(lo), 'f', 1, 64)
	if string(m[1]) != millions || string(m[2]) != perRoot {
		t.Errorf("DefaultMaxBytes' doc says MaxPending %s million at %s bytes a root; Config.Bytes gives %s million (%d) at %s", m[1], m[2], millions, lo, perRoot)
	}
}
