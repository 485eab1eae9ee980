package sandbox_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agentkernel/agentkernel/internal/testenv"
)

// The manager starts a reaper and guest clients; none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(testenv.Main(m)) }
