//go:build !linux

package affinity

import (
	"errors"
	"fmt"
	"runtime"
)

// pinOS is Pin where only Linux pins: a no-op unpin and an error
// wrapping errors.ErrUnsupported.
func pinOS(cpu int) (unpin func(), err error) {
	return func() {}, fmt.Errorf("affinity: pinning to CPU %d on %s: %w", cpu, runtime.GOOS, errors.ErrUnsupported)
}

// currentCPUOS is CurrentCPU where only Linux answers: an error wrapping
// errors.ErrUnsupported.
func currentCPUOS() (int, error) {
	return -1, fmt.Errorf("affinity: current CPU on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
