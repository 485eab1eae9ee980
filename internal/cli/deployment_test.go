package cli_test

import (
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

func TestDeploymentCommands(t *testing.T) {
	d := daemontest.Start(t)
	run := inProcess(t, d)
	agentOut, _ := run(0, "agent", "create", "--name", "nightly", "--model", "claude-none")
	agent := strings.TrimSpace(agentOut)
	envOut, _ := run(0, "env", "create", "--name", "local", "--driver", "process")
	env := strings.TrimSpace(envOut)

	out, _ := run(0, "deployment", "create", "--agent", agent, "--environment", env, "--name", "digest",
		"--message", "summarise", "--cron", "0 6 * * 7", "--timezone", "Europe/Paris")
	dep := strings.TrimSpace(out)
	if !strings.HasPrefix(dep, "depl_") {
		t.Fatalf("deployment create: %q", out)
	}
	if out, _ := run(0, "deployment", "ls"); !strings.Contains(out, dep) || !strings.Contains(out, "0 6 * * 7 Europe/Paris") || !strings.Contains(out, "active") {
		t.Fatalf("deployment ls: %q", out)
	}
	if out, _ := run(0, "deployment", "pause", dep); strings.TrimSpace(out) != dep+" paused" {
		t.Fatalf("deployment pause: %q", out)
	}
	out, _ = run(0, "deployment", "run", dep)
	sess := strings.TrimSpace(out)
	if !strings.HasPrefix(sess, "sesn_") {
		t.Fatalf("deployment run: %q", out)
	}
	if out, _ := run(0, "deployment", "runs", dep); !strings.Contains(out, sess) || !strings.Contains(out, "manual") {
		t.Fatalf("deployment runs: %q", out)
	}
	if out, _ := run(0, "deployment", "unpause", dep); strings.TrimSpace(out) != dep+" active" {
		t.Fatalf("deployment unpause: %q", out)
	}
	if out, _ := run(0, "deployment", "get", dep); !strings.Contains(out, `"name": "digest"`) && !strings.Contains(out, `"name":"digest"`) {
		t.Fatalf("deployment get: %q", out)
	}
	_, errOut := run(1, "deployment", "create", "--agent", agent, "--environment", env, "--name", "bad", "--message", "x", "--cron", "0 6 * *")
	if !strings.Contains(errOut, "schedule.expression") {
		t.Fatalf("bad cron: %q", errOut)
	}
	run(2, "deployment", "create", "--name", "x")
}
