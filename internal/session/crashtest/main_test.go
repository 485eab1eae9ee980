package crashtest

import (
	"os"
	"testing"

	"github.com/agentkernel/agentkernel/internal/testenv"
)

// TestMain removes the binary the tests build once (testenv.Main).
func TestMain(m *testing.M) { os.Exit(testenv.Main(m).Run()) }
