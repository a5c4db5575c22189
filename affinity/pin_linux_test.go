package affinity

import (
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestPin(t *testing.T) {
	before := mustAllowed(t)
	// Pin to the last allowed CPU: on a machine with one CPU it is the only
	// choice, elsewhere it is unlikely to be where the test already runs.
	cpu := before[len(before)-1]

	// All checks run on one goroutine: the mask is per thread, and Pin locks
	// this goroutine to its thread.
	unpin, err := Pin(cpu)
	if err != nil {
		t.Fatal(err)
	}
	during, err := allowedCPUs()
	if err != nil {
		unpin()
		t.Fatal(err)
	}
	got, cpuErr := CurrentCPU()
	unpin()
	after, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}

	if !slices.Equal(during, []int{cpu}) {
		t.Errorf("mask while pinned = %v, want exactly [%d]", during, cpu)
	}
	if cpuErr != nil || got != cpu {
		t.Errorf("CurrentCPU while pinned = %d, %v; want %d", got, cpuErr, cpu)
	}
	if !slices.Equal(after, before) {
		t.Errorf("mask after unpin = %v, want %v", after, before)
	}
	unpin() // a second call must do nothing, in particular not unlock twice
}

func TestPinNests(t *testing.T) {
	allowed := mustAllowed(t)
	// A caller that already locked its thread stays locked after unpin.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	unpin, err := Pin(allowed[0])
	if err != nil {
		t.Fatal(err)
	}
	unpin()
	wantMask(t, allowed, "after unpin")
}

func TestPinRejects(t *testing.T) {
	// Stay on one thread so that the mask compared at the end is the one
	// the failed Pins saw.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	allowed := mustAllowed(t)
	for _, cpu := range []int{-1, allowed[len(allowed)-1] + 1, maxCPU, 1 << 20} {
		unpin, err := Pin(cpu)
		if unpin == nil {
			t.Fatalf("Pin(%d) returned a nil unpin", cpu)
		}
		unpin()
		if err == nil {
			t.Errorf("Pin(%d) succeeded outside the allowed set %v", cpu, allowed)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "affinity: ") || !strings.Contains(msg, "CPU "+strconv.Itoa(cpu)+" ") ||
			!strings.Contains(msg, formatCPUList(allowed)) {
			t.Errorf("Pin(%d) error %q does not name the package, the CPU and the allowed set %s", cpu, msg, formatCPUList(allowed))
		}
	}
	// A failed Pin leaves the thread's mask alone.
	wantMask(t, allowed, "after failed Pins")
}

func TestCurrentCPU(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	allowed := mustAllowed(t)
	cpu, err := CurrentCPU()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(allowed, cpu) {
		t.Errorf("CurrentCPU = %d, not in the allowed set %v", cpu, allowed)
	}
}

// mustAllowed is the calling thread's allowed CPUs, or the test's end.
func mustAllowed(t *testing.T) []int {
	t.Helper()
	allowed, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	return allowed
}

// wantMask fails the test unless the calling thread's mask is still want.
func wantMask(t *testing.T, want []int, when string) {
	t.Helper()
	if got, _ := allowedCPUs(); !slices.Equal(got, want) {
		t.Errorf("mask %s = %v, want %v", when, got, want)
	}
}
