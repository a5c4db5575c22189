package ring

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: a producer
// or consumer still blocked after its test is a wake-up or Close bug.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
