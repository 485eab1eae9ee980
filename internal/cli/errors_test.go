package cli_test

import (
	"strings"
	"testing"
)

// TestErrorsSayTheCauseOnce: a failing command prints one line: the
// command's path once, then the cause once — no second "agentkernel:"
// from the SDK, no request dump.
func TestErrorsSayTheCauseOnce(t *testing.T) {
	bin := binary(t)
	home := t.TempDir()
	s := startServer(t, bin, home, freePort(t))
	defer s.stop(t)
	env := s.env()

	// A local failure too: a second `object init` into the same dir.
	dir := t.TempDir()
	run(t, bin, env, 0, "object", "init", "--lang", "go", dir)

	cases := []struct {
		env    []string
		args   []string
		prefix string
		wants  []string
	}{
		{env, []string{"object", "get", "counter", "a"}, "agentkernel object get: ", []string{`object "counter/a" not found`, "HTTP 404"}},
		{env, []string{"object", "call", "nosuch", "a", "m"}, "agentkernel object call: ", []string{`"nosuch"`, "HTTP 404"}},
		{env, []string{"sandbox", "get", "sbx_nosuch"}, "agentkernel sandbox get: ", []string{"sbx_nosuch", "HTTP 404"}},
		{env, []string{"key", "create", "--name", "x", "--tenant", "tnt_nosuch"}, "agentkernel key create: ", []string{"tenant_id"}},
		{env, []string{"session", "new", "--agent", "agent_nosuch", "--env", "env_nosuch"}, "agentkernel session new: ", []string{"agent_nosuch", "HTTP 404"}},
		{env, []string{"object", "init", "--lang", "go", dir}, "agentkernel object init: ", []string{"already exists", "--force"}},
		{cleanEnv("AGENTKERNEL_URL=http://"+s.addr, "AGENTKERNEL_API_KEY=ak_wrong"), []string{"sandbox", "ls"}, "agentkernel sandbox ls: ", []string{"HTTP 401"}},
		// Nothing listens on port 1: the cause and where to point the CLI.
		{cleanEnv("AGENTKERNEL_URL=http://127.0.0.1:1", "AGENTKERNEL_API_KEY=ak_x"), []string{"sandbox", "ls"}, "agentkernel sandbox ls: ", []string{"connection refused", "AGENTKERNEL_URL"}},
	}
	for _, c := range cases {
		_, stderr := run2(t, bin, c.env, 1, c.args...)
		if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, c.prefix) {
			t.Errorf("%v: want one line starting %q, got %q", c.args, c.prefix, stderr)
			continue
		}
		if strings.Contains(stderr, "agentkernel:") || strings.Count(stderr, c.prefix) != 1 {
			t.Errorf("%v: a prefix repeats: %q", c.args, stderr)
		}
		for _, w := range c.wants {
			if strings.Count(stderr, w) != 1 {
				t.Errorf("%v: want %q exactly once in %q", c.args, w, stderr)
			}
		}
	}
}
