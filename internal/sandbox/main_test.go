package sandbox_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The manager starts a reaper and guest clients; none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
