package layout

import (
	"runtime"
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

// TestOwn checks that Own's arrays start a line and that two of them
// never share one, for element sizes that divide a line and one that
// does not.
func TestOwn(t *testing.T) {
	type rec struct{ a, b, c uint64 } // 24 bytes
	check := func(name string, start uintptr, n, cp, bytes, want int) {
		t.Helper()
		if start%CacheLine != 0 || n != cp || bytes < want {
			t.Errorf("%s: start %#x (mod %d = %d), len %d cap %d, OwnBytes %d for %d bytes of data", name, start, CacheLine, start%CacheLine, n, cp, bytes, want)
		}
	}
	type span struct{ from, to uintptr } // the lines an array touches
	var spans []span
	var keep []any // every array stays live, so that none's memory is reused for a later one
	for _, n := range []int{1, 3, 16, 17, 100} {
		a := Own[int32](n)
		check("int32", uintptr(unsafe.Pointer(&a[0])), len(a), cap(a), OwnBytes[int32](n), 4*n)
		b := Own[uint64](n)
		check("uint64", uintptr(unsafe.Pointer(&b[0])), len(b), cap(b), OwnBytes[uint64](n), 8*n)
		c := Own[rec](n)
		check("rec", uintptr(unsafe.Pointer(&c[0])), len(c), cap(c), OwnBytes[rec](n), 24*n)
		for _, s := range []span{
			{uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&a[n-1])) + 4},
			{uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&b[n-1])) + 8},
			{uintptr(unsafe.Pointer(&c[0])), uintptr(unsafe.Pointer(&c[n-1])) + 24},
		} {
			s.from, s.to = s.from/CacheLine, (s.to+CacheLine-1)/CacheLine
			for _, o := range spans {
				if s.from < o.to && o.from < s.to {
					t.Fatalf("arrays on lines [%d, %d) and [%d, %d) share a line", s.from, s.to, o.from, o.to)
				}
			}
			spans = append(spans, s)
		}
		keep = append(keep, a, b, c)
	}
	runtime.KeepAlive(keep)
}
