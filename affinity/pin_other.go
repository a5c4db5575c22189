//go:build !linux

package affinity

import (
	"errors"
	"fmt"
	"runtime"
)

// Pin would restrict the calling thread to one CPU; only Linux supports it.
// It returns a no-op unpin and an error wrapping errors.ErrUnsupported.
func Pin(cpu int) (unpin func(), err error) {
	return func() {}, fmt.Errorf("affinity: pinning to CPU %d on %s: %w", cpu, runtime.GOOS, errors.ErrUnsupported)
}

// CurrentCPU would return the CPU the calling thread runs on; only Linux
// supports it. It returns an error wrapping errors.ErrUnsupported.
func CurrentCPU() (int, error) {
	return -1, fmt.Errorf("affinity: current CPU on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
