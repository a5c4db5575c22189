package bytesize

import "testing"

func TestOf(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{512, "512 bytes"},
		{1536, "1536 bytes (1.5 KiB)"},
		{3 << 20, "3145728 bytes (3.0 MiB)"},
		{3 << 30, "3221225472 bytes (3.0 GiB)"},
		{Saturated, "more than 9223372036854775807 bytes (8 EiB)"},
	} {
		if got := Of(c.n); got != c.want {
			t.Errorf("Of(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
