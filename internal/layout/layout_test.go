package layout

import (
	"strings"
	"testing"
	"unsafe"
)

func TestApart(t *testing.T) {
	type padded struct {
		a uint64
		_ [CacheLine - 8]byte
		b uint64
		_ [CacheLine - 8]byte
	}
	var p padded
	if err := Apart("padded", unsafe.Offsetof(p.a), unsafe.Offsetof(p.b), unsafe.Sizeof(p)); err != nil {
		t.Error(err)
	}
	type unpadded struct {
		a, b uint64
	}
	var u unpadded
	err := Apart("unpadded", unsafe.Offsetof(u.a), unsafe.Offsetof(u.b))
	if err == nil || !strings.Contains(err.Error(), "unpadded: offset 8") {
		t.Errorf("unpadded: %v, want an error naming offset 8", err)
	}
}
