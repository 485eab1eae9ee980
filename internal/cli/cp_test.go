package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCpPaths: `sandbox cp` sends the path exactly as given. One that
// climbs out of the workspace fails, naming the path, and writes nothing
// anywhere (it used to follow the router's redirect for "../.." and exit 0
// having written nothing); awkward but legal names round-trip; and a
// redirect, whatever causes it, is an error, never a silent success.
func TestCpPaths(t *testing.T) {
	bin := binary(t)
	home := t.TempDir()
	s := startServer(t, bin, home, freePort(t))
	defer s.stop(t)
	env := s.env()
	id := strings.TrimSpace(run(t, bin, env, 0, "sandbox", "create"))
	defer run(t, bin, env, 0, "sandbox", "rm", id)

	local := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(local, []byte("payload"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dst := range []string{"../../tmp/x", "sub/../../x", ".."} {
		_, stderr := run2(t, bin, env, 1, "sandbox", "cp", local, id+":"+dst)
		if !strings.Contains(stderr, dst) {
			t.Errorf("cp to %q: the error does not name the path: %q", dst, stderr)
		}
	}
	// Nothing landed outside the workspace (nor inside it).
	run(t, bin, env, 1, "sandbox", "exec", id, "--", "sh", "-c", "test -e /tmp/x || test -e /x || test -e /workspace/x")

	// Names a URL would mangle round-trip, both ways.
	names := []string{"with space", "100%", "50%25", "%2E%2E", "hash#tag", "what?", "a?b=c&d", "ünïcødé ✓", "semi;colon", "dir/./dot", "dir//double"}
	for _, name := range names {
		body := "content of " + name
		if err := os.WriteFile(local, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, bin, env, 0, "sandbox", "cp", local, id+":names/"+name)
		clean := filepath.Clean("names/" + name)
		if got := run(t, bin, env, 0, "sandbox", "exec", id, "--", "cat", "/workspace/"+clean); got != body {
			t.Errorf("cp to %q wrote %q at %s", name, got, clean)
		}
		if got := run(t, bin, env, 0, "sandbox", "cp", id+":names/"+name, "-"); got != body {
			t.Errorf("cp back from %q read %q", name, got)
		}
	}

	// A daemon address whose path the router cleans answers 307; the
	// upload must fail, not "succeed" without writing.
	redirected := cleanEnv("AGENTKERNEL_HOME="+home, "AGENTKERNEL_URL=http://"+s.addr+"/x/..")
	_, stderr := run2(t, bin, redirected, 1, "sandbox", "cp", local, id+":via-redirect")
	if !strings.Contains(stderr, "redirect") {
		t.Errorf("cp through a redirect: %q", stderr)
	}
	run(t, bin, env, 1, "sandbox", "exec", id, "--", "test", "-e", "/workspace/via-redirect")
}
