package pipeline

import (
	"testing"

	"github.com/xorack/xorack/acker"
)

// TestConfigDefaults: validate fills Receivers and Batch, and names a bad
// value with its package, type and field.
func TestConfigDefaults(t *testing.T) {
	got, err := Config{Shards: 1, Producers: 1, Tasks: 3}.validate()
	if err != nil || got.Receivers != 3 || got.Batch != acker.DefaultBatch {
		t.Fatalf("filled %+v, %v", got, err)
	}
	if _, err := (Config{Shards: 0, Tasks: 1}).validate(); err == nil || err.Error() != "pipeline: Config.Shards 0 below 1" {
		t.Errorf("Shards 0: %v", err)
	}
}
