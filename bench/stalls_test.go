package bench

import (
	"math"
	"testing"
	"time"
)

// TestStallCount feeds spin a scripted clock: the gaps between reads are
// known, so are the counts, the longest gap and the time spun.
func TestStallCount(t *testing.T) {
	us := time.Microsecond
	reads := []time.Duration{0, 1 * us, 2 * us, 12 * us, 13 * us, 200 * us, 201 * us, 1500 * us, 1501 * us}
	i := 0
	now := func() time.Duration {
		r := reads[i]
		i++
		return r
	}
	var sc stallCount
	sc.spin(now, 1501*us)
	if i != len(reads) {
		t.Fatalf("spin read the clock %d times, want %d (until the end)", i, len(reads))
	}
	// Gaps: 1, 1, 10, 1, 187, 1, 1299, 1 µs.
	if want := [3]int64{3, 2, 1}; sc.over != want {
		t.Errorf("over = %v, want %v", sc.over, want)
	}
	if sc.max != 1299*us || sc.spent != 1501*us {
		t.Errorf("max %v spent %v, want 1.299ms and 1.501ms", sc.max, sc.spent)
	}
	s := summarizeStalls([]stallCount{sc, {spent: 1501 * us}})
	secs := 2 * 1501e-6
	if s.Threads != 2 || math.Abs(s.Seconds-1501e-6) > 1e-12 || s.MaxNs != int64(1299*us) {
		t.Errorf("summary %+v", s)
	}
	if math.Abs(s.Over10us-3/secs) > 1e-6 || math.Abs(s.Over100us-2/secs) > 1e-6 || math.Abs(s.Over1ms-1/secs) > 1e-6 {
		t.Errorf("rates %+v, want %v, %v, %v per second", s, 3/secs, 2/secs, 1/secs)
	}
}

// TestMeasureStalls runs the real meter briefly: the threads spin from
// their start until the deadline (not past it by more than the longest
// gap), and some gap was seen.
func TestMeasureStalls(t *testing.T) {
	d := 20 * time.Millisecond
	s := MeasureStalls(d, 2)
	if s.Threads != 2 || s.Seconds <= 0 || s.Seconds > (d+time.Duration(s.MaxNs)).Seconds() {
		t.Fatalf("%+v: want 2 threads spinning up to %v each", s, d)
	}
	if s.MaxNs <= 0 {
		t.Errorf("longest gap %d ns", s.MaxNs)
	}
	if s.Over10us < s.Over100us || s.Over100us < s.Over1ms || s.Over1ms < 0 {
		t.Errorf("rates not ordered: %+v", s)
	}
}
