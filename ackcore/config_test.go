package ackcore

import (
	"testing"
	"time"
)

// TestConfigDefaults: validate fills every defaulted field from its
// Default constant, and the filled copy validates to itself.
func TestConfigDefaults(t *testing.T) {
	got, err := Config{MaxPending: 10}.validate()
	if err != nil {
		t.Fatal(err)
	}
	if got.Timeout != DefaultTimeout || got.Tick != DefaultTick || got.Owners != DefaultOwners ||
		got.MaxBytes != DefaultMaxBytes || got.Clock == nil || got.ProgressCap != 0 {
		t.Errorf("filled %+v, want Timeout %v, Tick %v, Owners %d, MaxBytes %d, a clock, no ProgressCap",
			got, DefaultTimeout, DefaultTick, DefaultOwners, DefaultMaxBytes)
	}
	again, err := got.validate()
	if err != nil || again != got {
		t.Errorf("validate(filled) = %+v, %v; want the same copy", again, err)
	}
	for _, c := range []struct {
		timeout, want time.Duration
	}{
		{0, DefaultProgressCap * DefaultTimeout},
		{3 * time.Hour, MaxTimeout}, // ten timeouts would pass MaxTimeout
	} {
		got, err := Config{MaxPending: 10, Timeout: c.timeout, ProgressTimeout: true}.validate()
		if err != nil || got.ProgressCap != c.want {
			t.Errorf("ProgressTimeout, Timeout %v: ProgressCap %v, %v; want %v", c.timeout, got.ProgressCap, err, c.want)
		}
		if again, err := got.validate(); err != nil || again != got {
			t.Errorf("validate(filled) = %+v, %v; want the same copy", again, err)
		}
	}
}
