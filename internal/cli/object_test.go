package cli_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/cli"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// The object verbs against a real in-process daemon.
func TestObjectCommands(t *testing.T) {
	app := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(app, "counter"), "github.com/agentkernel/agentkernel/internal/object/testdata/counter")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build counter: %v\n%s", err, out)
	}
	d := daemontest.Start(t, func(c *config.Config) {
		c.Objects = []config.ObjectClassConfig{{Class: "counter", InitCommand: []string{"/app/counter"}, AppDir: app}}
		c.DurableObjects.AppRoots = []string{app}
	})
	env := []string{"AGENTKERNEL_URL=" + d.URL, "AGENTKERNEL_API_KEY=" + d.AdminKey}
	run := func(want int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		m := &cli.Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Environ: env}
		if code := m.Run(context.Background(), args); code != want {
			t.Fatalf("agentkernel %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}
	t.Cleanup(func() { run(0, "object", "rm", "counter", "a") })

	if out := run(0, "object", "call", "counter", "a", "increment", "--args", `{"amount": 5}`); strings.TrimSpace(out) != `{"value":5}` {
		t.Fatalf("call: %q", out)
	}
	if out := run(0, "object", "get", "counter", "a"); !strings.Contains(out, "Active") || !strings.Contains(out, "count") {
		t.Fatalf("get: %q", out)
	}
	if out := run(0, "object", "ls", "--class", "counter"); !strings.Contains(out, "STATUS") || !strings.Contains(out, "a") {
		t.Fatalf("ls: %q", out)
	}
	run(0, "object", "hibernate", "counter", "a")
	if out := run(0, "object", "ls", "--status", "Hibernating"); !strings.Contains(out, "Hibernating") {
		t.Fatalf("ls hibernating: %q", out)
	}
	id := strings.TrimSpace(run(0, "object", "alarm", "set", "counter", "a", "increment", "--at", "1h"))
	if out := run(0, "object", "alarm", "ls", "counter", "a"); !strings.Contains(out, id) {
		t.Fatalf("alarm ls: %q", out)
	}
	run(0, "object", "alarm", "rm", "counter", "a", id)
	def := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(def, []byte(`{"class":"mine","init_command":["/app/counter"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	run(0, "object", "define", def)
	t.Cleanup(func() { run(0, "object", "rm", "mine", "b") })
	if out := run(0, "object", "bundle", "push", "mine", app); !strings.Contains(out, "sha256") {
		t.Fatalf("bundle push: %q", out)
	}
	if out := run(0, "object", "call", "mine", "b", "increment"); strings.TrimSpace(out) != `{"value":1}` {
		t.Fatalf("call on the bundled class: %q", out)
	}
	if out := run(0, "object", "classes"); !strings.Contains(out, "mine") || !strings.Contains(out, "config") || !strings.Contains(out, "bundle ") {
		t.Fatalf("classes: %q", out)
	}
	if out := run(0, "object", "bundle", "get", "mine"); !strings.Contains(out, "sha256") {
		t.Fatalf("bundle get: %q", out)
	}
	if out := run(1, "object", "call", "nosuch", "a", "get"); !strings.Contains(out, `"nosuch"`) {
		t.Fatalf("unknown class: %q", out)
	}
	run(2, "object", "call", "counter", "a")
}
