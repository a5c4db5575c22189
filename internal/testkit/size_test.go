package testkit

import (
	"flag"
	"testing"
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
