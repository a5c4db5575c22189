package affinity

import (
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestPin(t *testing.T) {
	before, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
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
	allowed, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	// A caller that already locked its thread stays locked after unpin.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	unpin, err := Pin(allowed[0])
	if err != nil {
		t.Fatal(err)
	}
	unpin()
	if after, _ := allowedCPUs(); !slices.Equal(after, allowed) {
		t.Errorf("mask after unpin = %v, want %v", after, allowed)
	}
}

func TestPinRejects(t *testing.T) {
	// Stay on one thread so that the mask compared at the end is the one
	// the failed Pins saw.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	allowed, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
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
	if after, _ := allowedCPUs(); !slices.Equal(after, allowed) {
		t.Errorf("mask after failed Pins = %v, want %v", after, allowed)
	}
}

func TestCurrentCPU(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	allowed, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := CurrentCPU()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(allowed, cpu) {
		t.Errorf("CurrentCPU = %d, not in the allowed set %v", cpu, allowed)
	}
}
