package console_test

import (
	"os"
	"testing"

	"github.com/agentkernel/agentkernel/internal/testenv"
)

// TestMain removes the guest binary the daemons of these tests share
// (testenv.Main).
func TestMain(m *testing.M) { os.Exit(testenv.Main(m).Run()) }
