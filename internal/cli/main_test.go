package cli_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agentkernel/agentkernel/internal/testenv"
)

// The CLI tests run daemons in-process; none of their goroutines may
// outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(testenv.Main(m)) }
