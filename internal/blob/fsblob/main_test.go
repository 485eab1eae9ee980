package fsblob

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The crash test re-executes this binary as a writer that gets killed;
	// that role never returns to the test framework.
	if os.Getenv(crashChildEnv) != "" {
		runCrashChild()
		return
	}
	goleak.VerifyTestMain(m)
}
