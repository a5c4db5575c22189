package pipeline_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: a pipe's
// loop or sender that Stop did not end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
