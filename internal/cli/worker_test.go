package cli_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWorkerCommand: `agentkernel worker` checks its flags, starts its
// local sandbox layer on its own home, polls the remote daemon's
// self_hosted environment with the environment key (the daemon counts it
// among the workers polling), and stops cleanly on SIGTERM.
func TestWorkerCommand(t *testing.T) {
	bin := binary(t)
	home := t.TempDir()
	s := startServer(t, bin, home, freePort(t))
	defer s.stop(t)
	env := s.env()
	envID := oneWord(t, "env create", run(t, bin, env, 0, "env", "create", "--name", "w", "--self-hosted"), "env_")
	key := oneWord(t, "key create", run(t, bin, env, 0, "key", "create", "--name", "w", "--environment", envID), "ak_")
	url := "http://" + s.addr

	for _, c := range []struct {
		args    []string
		mention string
	}{
		{[]string{"worker", "--url", url, "--key", key}, "--environment"},
		{[]string{"worker", "--environment", envID, "--key", key}, "--url"},
		{[]string{"worker", "--environment", envID, "--url", url}, "--key"},
		{[]string{"worker", "--environment", envID, "--url", url, "--key", key, "--max-sessions", "0"}, "--max-sessions"},
	} {
		if _, stderr := run2(t, bin, cleanEnv("HOME="+t.TempDir()), 2, c.args...); !strings.Contains(stderr, c.mention) {
			t.Errorf("%v: %q does not name %s", c.args, stderr, c.mention)
		}
	}

	whome, runDir := t.TempDir(), t.TempDir()
	cmd := exec.Command(bin, "worker", "--environment", envID, "--url", url, "--home", whome, "--listen", freePort(t))
	cmd.Env = cleanEnv("HOME="+whome, "AGENTKERNEL_ENVIRONMENT_KEY="+key, "AGENTKERNEL_SANDBOX_RUN_DIR="+filepath.Join(runDir, "r"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	admin, err := os.ReadFile(filepath.Join(home, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		req, _ := http.NewRequest("GET", url+"/v1/environments/"+envID+"/work/stats", nil)
		req.Header.Set("x-api-key", strings.TrimSpace(string(admin)))
		var st struct {
			WorkersPolling int `json:"workers_polling"`
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
		}
		if st.WorkersPolling == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker never polled\n%s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("worker exit: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "agentkernel worker polling") {
		t.Errorf("the worker's log: %s", stderr.String())
	}
	// Its home is a sandbox layer's: anything it left is destroyed with
	// the test (startServer's cleanup).
	startServer(t, bin, whome, freePort(t)).stop(t)
}
