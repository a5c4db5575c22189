//go:build !linux

package affinity

import (
	"errors"
	"fmt"
	"runtime"
)

func (t *Topology) fillOS() error {
	return fmt.Errorf("affinity: CPU sets and core topology on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
