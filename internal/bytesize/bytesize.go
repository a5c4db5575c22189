// Package bytesize writes byte counts for error messages, the exact count
// first (so a reader can compare it with a configured value) and then as
// people read it: "3221225472 bytes (3.0 GiB)".
package bytesize

import "fmt"

// Saturated is the count a saturating byte computation stops at.
const Saturated = 1<<63 - 1

// Of writes n bytes: "3221225472 bytes (3.0 GiB)", "524288 bytes (512.0
// KiB)", "512 bytes"; a saturated count says it is more.
func Of(n int64) string {
	const gib, mib, kib = 1 << 30, 1 << 20, 1 << 10
	switch {
	case n == Saturated:
		return "more than 9223372036854775807 bytes (8 EiB)"
	case n >= gib:
		return fmt.Sprintf("%d bytes (%.1f GiB)", n, float64(n)/gib)
	case n >= mib:
		return fmt.Sprintf("%d bytes (%.1f MiB)", n, float64(n)/mib)
	case n >= kib:
		return fmt.Sprintf("%d bytes (%.1f KiB)", n, float64(n)/kib)
	}
	return fmt.Sprintf("%d bytes", n)
}
