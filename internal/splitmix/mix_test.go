package splitmix

import (
	"math/bits"
	"testing"
)

// TestMix64Bijective: distinct inputs give distinct outputs (spot check
// over structured inputs), and a one-bit change flips about half the
// output bits.
func TestMix64Bijective(t *testing.T) {
	seen := make(map[uint64]uint64, 1<<16)
	for i := uint64(0); i < 1<<14; i++ {
		for _, x := range []uint64{i, i << 16, i << 48, ^i} {
			y := Mix64(x)
			if p, ok := seen[y]; ok && p != x {
				t.Fatalf("Mix64(%#x) == Mix64(%#x) == %#x", x, p, y)
			}
			seen[y] = x
		}
	}
	flips := 0
	const n = 4096
	for i := uint64(1); i <= n; i++ {
		flips += bits.OnesCount64(Mix64(i) ^ Mix64(i^1<<(i%64)))
	}
	if avg := float64(flips) / n; avg < 28 || avg > 36 {
		t.Errorf("a one-bit change flips %.1f bits on average; want about 32", avg)
	}
}

// TestStep: the known first outputs of SplitMix64 seeded with 0.
func TestNth(t *testing.T) {
	var s uint64
	for n := uint64(1); n <= 3; n++ {
		if step, nth := Step(&s), Nth(n); step != nth {
			t.Errorf("Nth(%d) = %#x, want the %d-th Step from 0, %#x", n, nth, n, step)
		}
	}
}

func TestStep(t *testing.T) {
	var s uint64
	want := []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f}
	for i, w := range want {
		if g := Step(&s); g != w {
			t.Fatalf("output %d = %#x, want %#x", i, g, w)
		}
	}
}

func TestSeedDiffers(t *testing.T) {
	a, b, c := Seed(), Seed(), Seed()
	if a == b && b == c {
		t.Errorf("Seed returned %#x three times", a)
	}
}
