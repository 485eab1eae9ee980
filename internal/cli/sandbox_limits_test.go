package cli_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestCLISandboxCreateLimits: `sandbox create --memory-mb/--pids/--cpus`
// asks for limits within the daemon's maximums; over a maximum the CLI
// fails with the daemon's message naming it, and 0 (which never meant
// "no limit") is refused before anything is sent.
func TestCLISandboxCreateLimits(t *testing.T) {
	bin := staticBinary(t)
	s := startServer(t, bin, t.TempDir(), freePort(t))
	defer s.stop(t)
	env := s.env()
	// Sandboxes outlive the daemon: remove every one, also those a failing
	// check created, before it stops.
	defer func() {
		var list []struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal([]byte(run(t, bin, env, 0, "sandbox", "ls", "--json")), &list)
		for _, sb := range list {
			run(t, bin, env, 0, "sandbox", "rm", sb.ID)
		}
	}()

	id := strings.TrimSpace(run(t, bin, env, 0, "sandbox", "create", "--memory-mb", "300", "--pids", "100", "--cpus", "0.5"))
	var sb struct {
		Limits  map[string]float64 `json:"limits"`
		Runtime struct {
			Enforcement map[string]struct {
				Value     float64 `json:"value"`
				Mechanism string  `json:"mechanism"`
			} `json:"enforcement"`
		} `json:"runtime"`
	}
	if err := json.Unmarshal([]byte(run(t, bin, env, 0, "sandbox", "get", id, "--json")), &sb); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]float64{"memory_mb": 300, "pids": 100, "cpus": 0.5} {
		if e := sb.Runtime.Enforcement[field]; sb.Limits[field] != want || e.Value != want || e.Mechanism == "" {
			t.Errorf("%s: limit %v, in force %+v; want %v", field, sb.Limits[field], e, want)
		}
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--memory-mb", "100000"}, 1, "maximum of 8192 MB"},
		{[]string{"--pids", "2"}, 1, "minimum of 16"},
		{[]string{"--pids", "0"}, 2, "--pids 0"},
	} {
		cmd := exec.Command(bin, append([]string{"sandbox", "create"}, c.args...)...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("sandbox create %v: %v, stderr %q; want exit %d mentioning %q", c.args, err, stderr.String(), c.code, c.want)
		}
	}
	if out := run(t, bin, env, 0, "sandbox", "ls"); strings.Count(out, "sbx_") != 1 {
		t.Fatalf("refused creates left sandboxes: %s", out)
	}
}
