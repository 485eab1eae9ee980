package cli_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The CLI tests run daemons in-process; none of their goroutines may
// outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
