// Package sdk_test runs the Python and Node object helpers, and their
// counter examples, against the same contract suite as the Go helper.
package sdk_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentkernel/agentkernel/internal/testenv"
	"github.com/agentkernel/agentkernel/objectserver/objectservertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// interpreter returns path, skipping the test when it is not installed.
func interpreter(t *testing.T, path string) string {
	t.Helper()
	return testenv.File(t, path, "apt-get install -y python3 nodejs: the helpers need their interpreter")
}

func abs(t testing.TB, rel string) string {
	t.Helper()
	p, err := filepath.Abs(rel)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPython(t *testing.T) {
	py := interpreter(t, "/usr/bin/python3")
	pythonPath := "PYTHONPATH=" + abs(t, "python")
	t.Run("counter", func(t *testing.T) {
		cmd := exec.Command(py, abs(t, "python/examples/counter.py"))
		cmd.Env = append(os.Environ(), pythonPath)
		objectservertest.Counter(t, objectservertest.StartProcess(t, cmd))
	})
	t.Run("probe", func(t *testing.T) {
		cmd := exec.Command(py, abs(t, "testdata/probe.py"))
		cmd.Env = append(os.Environ(), pythonPath)
		objectservertest.Probe(t, objectservertest.StartProcess(t, cmd))
	})
}

func TestNode(t *testing.T) {
	node := interpreter(t, "/usr/bin/node")
	t.Run("counter", func(t *testing.T) {
		cmd := exec.Command(node, abs(t, "node/examples/counter.js"))
		objectservertest.Counter(t, objectservertest.StartProcess(t, cmd))
	})
	t.Run("probe", func(t *testing.T) {
		cmd := exec.Command(node, abs(t, "testdata/probe.js"))
		cmd.Env = append(os.Environ(), "AGENTKERNEL_OBJECT_MODULE="+abs(t, "node/agentkernel-object.js"))
		objectservertest.Probe(t, objectservertest.StartProcess(t, cmd))
	})
}
