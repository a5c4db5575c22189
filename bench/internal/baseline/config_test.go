package baseline

import (
	"testing"

	"github.com/xorack/xorack/ackcore"
)

// TestConfigDefaults: validate fills Timeout, Tick and Clock with
// ackcore's defaults, the filled copy validates to itself, and a bad value
// is named with its package, type and field.
func TestConfigDefaults(t *testing.T) {
	got, err := Config{MaxPending: 8}.validate()
	if err != nil || got.Timeout != ackcore.DefaultTimeout || got.Tick != ackcore.DefaultTick || got.Clock == nil {
		t.Fatalf("filled %+v, %v", got, err)
	}
	if again, err := got.validate(); err != nil || again != got {
		t.Errorf("validate(filled) = %+v, %v", again, err)
	}
	if _, err := (Config{MaxPending: 8, Tick: -1}).validate(); err == nil || err.Error() != "baseline: Config.Tick -1ns out of range [1µs, 1s]" {
		t.Errorf("Tick -1: %v", err)
	}
}
