package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/cli"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// demoScript answers the first message with text and one bash call, and
// the tool's result with a final message; a third model call finds the
// script exhausted (a session.error).
const demoScript = `{"turns": [
  {"text": "I'll write the file.", "tool_calls": [{"name": "bash", "input": {"command": "echo hello from the sandbox > hello.txt && cat hello.txt"}}]},
  {"text": "Done: hello.txt says hello."}
]}`

// The agent, env and session verbs against a real in-process daemon whose
// "demo" model is the scripted provider; the bash call runs in a real
// sandbox.
func TestSessionCommands(t *testing.T) {
	script := filepath.Join(t.TempDir(), "demo.json")
	if err := os.WriteFile(script, []byte(demoScript), 0o600); err != nil {
		t.Fatal(err)
	}
	d := daemontest.Start(t, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"demo": {Provider: config.ProviderScripted, File: script}}
	})
	run := inProcess(t, d)
	id := func(out, prefix string) string {
		t.Helper()
		s := strings.TrimSpace(out)
		if !strings.HasPrefix(s, prefix) || strings.ContainsAny(s, " \n") {
			t.Fatalf("want one %s… id, got %q", prefix, out)
		}
		return s
	}

	agentOut, _ := run(0, "agent", "create", "--name", "writer", "--model", "demo", "--system", "You write files.")
	agent := id(agentOut, "agent_")
	if out, _ := run(0, "agent", "ls"); !strings.Contains(out, agent) || !strings.Contains(out, "writer") || !strings.Contains(out, "demo") {
		t.Fatalf("agent ls: %q", out)
	}
	envOut, _ := run(0, "env", "create", "--name", "local", "--driver", "process")
	envID := id(envOut, "env_")
	out, _ := run(0, "env", "ls", "--json")
	var envs []struct {
		ID       string            `json:"id"`
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(out), &envs); err != nil || len(envs) != 1 || envs[0].ID != envID || envs[0].Metadata["agentkernel.driver"] != "process" {
		t.Fatalf("env ls --json: %v %q", err, out)
	}
	sessOut, _ := run(0, "session", "new", "--agent", agent, "--env", envID, "--title", "first try")
	sess := id(sessOut, "sesn_")
	if out, _ := run(0, "session", "ls"); !strings.Contains(out, sess) || !strings.Contains(out, "first try") {
		t.Fatalf("session ls: %q", out)
	}

	msg, _ := run(0, "session", "send", sess, "Write hello.txt")
	id(msg, "sevt_")
	trajectory, _ := run(0, "session", "tail", sess, "--from-start", "--until-idle")
	inOrder(t, trajectory,
		"user      Write hello.txt",
		"status    running",
		"agent     I'll write the file.",
		"tool      bash  $ echo hello from the sandbox > hello.txt && cat hello.txt",
		"result    bash",
		"hello from the sandbox",
		"agent     Done: hello.txt says hello.",
		"status    idle (end_turn)")

	// --json: one raw API event per line, the same trajectory.
	out, _ = run(0, "session", "tail", sess, "--from-start", "--until-idle", "--json")
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct {
			ID, Type string
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.ID == "" {
			t.Fatalf("--json line %q: %v", line, err)
		}
		types = append(types, e.Type)
	}
	inOrder(t, strings.Join(types, " "), "user.message", "session.status_running", "agent.tool_use", "agent.tool_result", "agent.message", "session.status_idle")

	// send --wait shows the next turn as it happens: the script is
	// exhausted, so the turn fails with session.error and still idles —
	// and send fails, so a script sees it.
	out, stderr := run(1, "session", "send", sess, "And again?", "--wait")
	inOrder(t, out, "user      And again?", "status    running", "error", "script", "status    idle (end_turn)")
	if !strings.HasPrefix(stderr, "agentkernel session send: ") || !strings.Contains(stderr, "session.error") || !strings.Contains(stderr, "script") {
		t.Fatalf("send --wait on a failed turn: stderr %q", stderr)
	}
	if strings.Contains(out, "Write hello.txt") {
		t.Fatalf("send --wait replayed the earlier turn:\n%s", out)
	}

	// Bad input is the API's message and a non-zero exit.
	_, stderr = run(1, "session", "new", "--agent", "agent_nosuch", "--env", envID)
	if !strings.Contains(stderr, "agent_nosuch") || !strings.Contains(stderr, "404") {
		t.Fatalf("unknown agent: %q", stderr)
	}
	_, stderr = run(1, "agent", "create", "--name", "x", "--model", "demo", "--tools", "none", "--url", d.URL, "--api-key", "wrong")
	if !strings.Contains(stderr, "401") {
		t.Fatalf("bad key: %q", stderr)
	}
	run(2, "session", "send", sess)
	run(2, "agent", "create", "--name", "x")

	if out, _ := run(0, "session", "rm", sess); !strings.Contains(out, "deleted "+sess) {
		t.Fatalf("rm: %q", out)
	}
	if out, _ := run(0, "session", "ls"); strings.Contains(out, sess) {
		t.Fatalf("deleted session still listed: %q", out)
	}
	if _, stderr := run(1, "session", "send", sess, "hello?"); !strings.Contains(stderr, sess) {
		t.Fatalf("send to a deleted session: %q", stderr)
	}
}

// inProcess runs the CLI in this process against d and returns its
// stdout and stderr, failing unless it exits with want.
func inProcess(t *testing.T, d *daemontest.Daemon) func(want int, args ...string) (stdout, stderr string) {
	env := []string{"AGENTKERNEL_URL=" + d.URL, "AGENTKERNEL_API_KEY=" + d.AdminKey}
	return func(want int, args ...string) (string, string) {
		t.Helper()
		// A safety net so a tail that never settles fails instead of
		// hanging the test binary.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var out, errb bytes.Buffer
		m := &cli.Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Environ: env}
		if code := m.Run(ctx, args); code != want {
			t.Fatalf("agentkernel %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out.String(), errb.String())
		}
		return out.String(), errb.String()
	}
}

// inOrder fails unless each want occurs in s after the previous one.
func inOrder(t *testing.T, s string, wants ...string) {
	t.Helper()
	rest := s
	for _, w := range wants {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("%q missing or out of order in:\n%s", w, s)
		}
		rest = rest[i+len(w):]
	}
}

// TestMissingModelKey: a claude-* model with no key anywhere ends the turn
// with a session.error that names what to set — not the Anthropic SDK's
// advice to run `ant auth login`, which means nothing to a daemon.
func TestMissingModelKey(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "")
	d := daemontest.Start(t)
	run := inProcess(t, d)
	agent, _ := run(0, "agent", "create", "--name", "helper", "--model", "claude-sonnet-4-5", "--tools", "none")
	envID, _ := run(0, "env", "create", "--name", "local")
	sess, _ := run(0, "session", "new", "--agent", strings.TrimSpace(agent), "--env", strings.TrimSpace(envID))
	sess = strings.TrimSpace(sess)
	out, stderr := run(1, "session", "send", sess, "hello", "--wait")
	for _, s := range []string{out, stderr} {
		if !strings.Contains(s, "ANTHROPIC_API_KEY") || !strings.Contains(s, `[models."claude-*"]`) || strings.Contains(s, "ant auth login") {
			t.Errorf("the missing key is not explained:\nstdout: %s\nstderr: %s", out, stderr)
		}
	}
}

// TestSessionForkRewindHistory: session fork, rewind and history, and the
// trajectory view marking where a rewind cut a branch off.
func TestSessionForkRewindHistory(t *testing.T) {
	script := filepath.Join(t.TempDir(), "demo.json")
	if err := os.WriteFile(script, []byte(`{"loop": true, "turns": [
  {"text": "Writing.", "tool_calls": [{"name": "bash", "input": {"command": "echo x >> log && wc -l < log"}}]},
  {"text": "Written."}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := daemontest.Start(t, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"demo": {Provider: config.ProviderScripted, File: script}}
	})
	run := inProcess(t, d)
	agent, _ := run(0, "agent", "create", "--name", "w", "--model", "demo")
	env, _ := run(0, "env", "create", "--name", "e")
	out, _ := run(0, "session", "new", "--agent", strings.TrimSpace(agent), "--env", strings.TrimSpace(env))
	sess := strings.TrimSpace(out)
	run(0, "session", "send", sess, "first", "--wait")
	run(0, "session", "send", sess, "second", "--wait")
	out, _ = run(0, "session", "tail", sess, "--from-start", "--until-idle", "--json")
	var result, second string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct {
			ID, Type string
			Content  []struct{ Text string }
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		if e.Type == "agent.tool_result" && result == "" {
			result = e.ID
		}
		if e.Type == "user.message" && len(e.Content) > 0 && e.Content[0].Text == "second" {
			second = e.ID
		}
	}
	if result == "" || second == "" {
		t.Fatalf("no tool result or second message in %s", out)
	}

	fork, stderr := run(0, "session", "fork", sess, "--at", result)
	fork = strings.TrimSpace(fork)
	if !strings.HasPrefix(fork, "sesn_") || !strings.Contains(stderr, "forked "+sess) {
		t.Fatalf("fork: %q %q", fork, stderr)
	}
	if out, _ := run(0, "session", "history", fork); !strings.Contains(out, "forked from "+sess) {
		t.Fatalf("history of the fork: %q", out)
	}
	// The fork's log has the one line written up to its point (the script
	// plays by the conversation's length: its bash call comes second).
	run(0, "session", "send", fork, "again", "--wait")
	if out, _ := run(0, "session", "send", fork, "and again", "--wait"); !strings.Contains(out, "result    bash\n                    2\n") {
		t.Fatalf("a turn on the fork: %q", out)
	}

	branch, stderr := run(0, "session", "rewind", sess, second)
	branch = strings.TrimSpace(branch)
	if !strings.HasPrefix(branch, "sesn_") || !strings.Contains(stderr, "branch "+branch) {
		t.Fatalf("rewind: %q %q", branch, stderr)
	}
	// The rewind went back to the second message: the agent answers it
	// again, after the mark of the branch it cut off.
	out, _ = run(0, "session", "tail", sess, "--from-start", "--until-idle")
	inOrder(t, out, "user      first", "status    idle", "user      second",
		"rewound here: what followed is branch "+branch, "status    running", "status    idle")
	out, _ = run(0, "session", "history", sess)
	inOrder(t, out, "TURN", "completed", "completed", "BRANCH", branch)
	// The branch keeps the turn it cut off.
	out, _ = run(0, "session", "history", branch)
	inOrder(t, out, "abandoned branch of "+sess, "completed")
	run(2, "session", "rewind", sess)
	if _, stderr := run(1, "session", "rewind", sess, "sevt_nosuch"); !strings.Contains(stderr, "sevt_nosuch") {
		t.Fatalf("rewind to an unknown event: %q", stderr)
	}
	if _, stderr := run(1, "session", "fork", "sesn_nosuch"); !strings.Contains(stderr, "404") {
		t.Fatalf("fork of an unknown session: %q", stderr)
	}
}
