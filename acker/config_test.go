package acker

import (
	"strings"
	"testing"

	"github.com/xorack/xorack/ackcore"
)

// TestConfigDefaults: validate fills every defaulted field from its
// Default constant (Batch and Receivers from what they derive from), the
// filled copy validates to itself, and a bad value is named with its
// package, type and field.
func TestConfigDefaults(t *testing.T) {
	in := Config{Spec: Spec{Producers: 3, Tasks: 5}, Shard: ackcore.Config{MaxPending: 1024}}
	got, err := in.validate()
	if err != nil {
		t.Fatal(err)
	}
	if got.Shards != DefaultShards || got.RingSize != DefaultRingSize || got.OutcomeRingSize != DefaultRingSize ||
		got.Backlog != DefaultBacklog || got.Batch != DefaultBatch || got.Receivers != 5 ||
		got.MaxBytes != DefaultMaxBytes || got.StopTimeout != DefaultStopTimeout || got.Shard.Owners != 3 {
		t.Errorf("filled %+v", got)
	}
	if again, err := got.validate(); err != nil || again.footprint() != got.footprint() || again.Shard != got.Shard {
		t.Errorf("validate(filled): %v, footprint %+v, want %+v", err, again.footprint(), got.footprint())
	}
	small, err := Config{Spec: in.Spec, Shard: in.Shard, RingSize: 64}.validate()
	if err != nil || small.Batch != 64 {
		t.Errorf("RingSize 64: Batch %d, %v; want the ring's size", small.Batch, err)
	}
	in.Shards = MaxShards + 1
	if _, err := in.validate(); err == nil || !strings.HasPrefix(err.Error(), "acker: Config.Shards 1025 out of range") {
		t.Errorf("Shards 1025: %v", err)
	}
}
