package netio

import (
	"testing"
	"unsafe"

	"github.com/xorack/xorack/internal/layout"
)

// TestPaddedLayout holds the client's padded counter sets to their
// padding: each set's fields start a cache line after the struct's
// leading pad and the struct ends on the next line boundary, so the set
// shares its line with nothing another goroutine writes (a sender's
// counters with another sender's, a host's with another host's, in the
// slices and structs that hold them side by side).
func TestPaddedLayout(t *testing.T) {
	var s sendCounts
	var o outCounts
	var io ioCounts
	for _, c := range []struct {
		name        string
		first, size uintptr
	}{
		{"sendCounts", unsafe.Offsetof(s.kinds), unsafe.Sizeof(s)},
		{"outCounts", unsafe.Offsetof(o.completed), unsafe.Sizeof(o)},
		{"ioCounts", unsafe.Offsetof(io.framesIn), unsafe.Sizeof(io)},
	} {
		if err := layout.Apart(c.name, 0, c.first, c.size); err != nil {
			t.Error(err)
		}
		// One line of counters, no more: a field past it would share a
		// line with whatever follows the struct.
		if c.size != c.first+layout.CacheLine {
			t.Errorf("%s: %d bytes, want its counters' line at %d and nothing after (%d)", c.name, c.size, c.first, c.first+layout.CacheLine)
		}
	}
}
