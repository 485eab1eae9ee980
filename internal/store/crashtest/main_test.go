package crashtest

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The crash tests re-execute this binary as the writer they kill; that
	// role never returns to the test framework.
	if os.Getenv(childEngineEnv) != "" {
		os.Exit(runChild())
	}
	goleak.VerifyTestMain(m)
}
