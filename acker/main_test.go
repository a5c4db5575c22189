package acker_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: an
// executor, a receiver's waiter or a flusher that Stop did not end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
