package testkit

import (
	"flag"
	"testing"

	"github.com/xorack/xorack/internal/invariants"
)

// TestSize: Size is the full count, and the short one under -short.
func TestSize(t *testing.T) {
	was := flag.Lookup("test.short").Value.String()
	t.Cleanup(func() { _ = flag.Set("test.short", was) })
	for _, short := range []string{"false", "true"} {
		if err := flag.Set("test.short", short); err != nil {
			t.Fatal(err)
		}
		want := map[string]int{"false": 300, "true": 60}[short]
		if got := Size(300, 60); got != want {
			t.Errorf("-short=%s: Size(300, 60) = %d, want %d", short, got, want)
		}
	}
}

// TestSizeUnderInvariants: SizeUnderInvariants is the full size, and the
// checked one in the invariant build (CI runs this test in both).
func TestSizeUnderInvariants(t *testing.T) {
	want := 65536
	if invariants.Enabled {
		want = 4096
	}
	if got := SizeUnderInvariants(65536, 4096); got != want {
		t.Errorf("SizeUnderInvariants(65536, 4096) = %d in a build with invariants %v", got, invariants.Enabled)
	}
}
