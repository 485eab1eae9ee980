package agentkernel_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// workspaceEnv is a daemon, a tenant's client and one of its sandboxes.
type workspaceEnv struct {
	t   *testing.T
	d   *daemontest.Daemon
	c   *agentkernel.Client
	sb  *agentkernel.Sandbox
	ctx context.Context
}

func newWorkspaceEnv(t *testing.T) *workspaceEnv {
	ctx := context.Background()
	d := daemontest.Start(t)
	admin := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	tn, err := admin.Tenants.Create(ctx, agentkernel.TenantCreateParams{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := admin.Keys.Create(ctx, agentkernel.KeyCreateParams{Name: "t", TenantID: tn.ID})
	if err != nil {
		t.Fatal(err)
	}
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(k.Secret))
	sb, err := c.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Sandboxes.Delete(context.Background(), sb.ID) })
	return &workspaceEnv{t: t, d: d, c: c, sb: sb, ctx: ctx}
}

func (e *workspaceEnv) sh(cmd string) string {
	e.t.Helper()
	res, err := e.c.Sandboxes.Exec(e.ctx, e.sb.ID, agentkernel.ExecParams{Command: cmd})
	if err != nil || res.ExitCode != 0 {
		e.t.Fatalf("exec %q: %+v %v", cmd, res, err)
	}
	return res.Stdout
}

func (e *workspaceEnv) stopStart() *agentkernel.Sandbox {
	e.t.Helper()
	if _, err := e.c.Sandboxes.Stop(e.ctx, e.sb.ID); err != nil {
		e.t.Fatal(err)
	}
	sb, err := e.c.Sandboxes.Start(e.ctx, e.sb.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return sb
}

// hostWorkspace is the sandbox's workspace on the host.
func (e *workspaceEnv) hostWorkspace() string {
	return filepath.Join(e.d.Config.SandboxDataDir(), e.sb.ID, "workspace")
}

// A git-style walk of /workspace sees only what the user put there, after
// creation, after an agent reported an event (kept by the guest until the
// daemon pulls it), and after a stop and a wake: nothing of the runtime.
func TestWorkspaceHoldsNothingOfTheRuntime(t *testing.T) {
	e := newWorkspaceEnv(t)
	if got := e.sh("find /workspace"); got != "/workspace\n" {
		t.Fatalf("a new sandbox's workspace holds %q", got)
	}
	e.sh("echo mine > /workspace/file && /.agentkernel/guest agent-event heartbeat running")
	e.stopStart()
	e.stopStart()
	if got := e.sh("find /workspace"); got != "/workspace\n/workspace/file\n" {
		t.Fatalf("after two wakes the workspace holds %q, want only the user's file", got)
	}
}

// The sandbox owns /workspace: a symlink it plants where the runtime once
// kept its generation stamp must not make the daemon write on the host.
func TestWorkspaceSymlinkDoesNotRedirectTheStamp(t *testing.T) {
	e := newWorkspaceEnv(t)
	target := t.TempDir()
	e.sh("rm -rf /workspace/.agentkernel && ln -s " + target + " /workspace/.agentkernel")
	e.stopStart()
	e.sh("true")
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Fatalf("the daemon wrote %d entries (%s…) into %s through the sandbox's symlink", len(entries), entries[0].Name(), target)
	}
}

// A sandbox started by an earlier version kept its stamp in the workspace.
// The first start after the upgrade moves it beside the workspace (so a
// workspace newer than its last backup is still not overwritten by it) and
// removes it from the workspace.
func TestLegacyStampIsMovedOutOfTheWorkspace(t *testing.T) {
	e := newWorkspaceEnv(t)
	e.sh("echo v1 > /workspace/state")
	if _, err := e.c.Sandboxes.Stop(e.ctx, e.sb.ID); err != nil { // backup holds v1
		t.Fatal(err)
	}
	// What the earlier version left: a workspace newer than the backup,
	// with its stamp inside.
	ws := e.hostWorkspace()
	sb, err := e.c.Sandboxes.Get(e.ctx, e.sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(filepath.Dir(ws), "generation"))
	if err := os.WriteFile(filepath.Join(ws, "state"), []byte("v2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, ".agentkernel"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".agentkernel", "generation"), []byte(strconv.FormatInt(sb.Generation, 10)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := e.sh("cat /workspace/state"); got != "v2\n" {
		t.Fatalf("state = %q: the older backup overwrote the surviving workspace", got)
	}
	if got := e.sh("find /workspace"); got != "/workspace\n/workspace/state\n" {
		t.Fatalf("after the upgrade the workspace holds %q", got)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "generation")); err != nil {
		t.Fatalf("no stamp beside the workspace: %v", err)
	}
}

// The old stamp is the sandbox's to write: read once, it is parsed as
// untrusted input and never followed out of the workspace.
func TestLegacyStampIsUntrustedInput(t *testing.T) {
	e := newWorkspaceEnv(t)
	if _, err := e.c.Sandboxes.Stop(e.ctx, e.sb.ID); err != nil {
		t.Fatal(err)
	}
	ws := e.hostWorkspace()
	host := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(host, []byte("999999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(filepath.Dir(ws), "generation"))
	if err := os.MkdirAll(filepath.Join(ws, ".agentkernel"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(ws, ".agentkernel", "generation"))
	if err := os.Symlink(host, filepath.Join(ws, ".agentkernel", "generation")); err != nil {
		t.Fatal(err)
	}
	sb, err := e.c.Sandboxes.Start(e.ctx, e.sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Generation > 100 {
		t.Fatalf("generation %d: the daemon read a host file through the workspace's symlink", sb.Generation)
	}
	if b, _ := os.ReadFile(host); string(b) != "999999999\n" {
		t.Fatalf("host file changed: %q", b)
	}
	if got := e.sh("ls -A /workspace"); strings.TrimSpace(got) != "" {
		t.Fatalf("the old stamp is still in the workspace: %q", got)
	}
}

// The guest's log is the daemon's: a symlink the sandbox plants wherever it
// can write must not make the daemon create, append to or read a host file.
func TestGuestLogIsOutOfTheSandboxesReach(t *testing.T) {
	e := newWorkspaceEnv(t)
	canary := filepath.Join(t.TempDir(), "canary")
	// Every host-backed directory the sandbox can write, and the old run
	// dir mount point.
	e.sh(`for m in $(awk '{print $5}' /proc/self/mountinfo) /run/agentkernel; do
  [ -w "$m" ] || continue
  rm -f "$m/guest.log"; ln -s ` + canary + ` "$m/guest.log" 2>/dev/null
done; true`)
	e.stopStart()
	e.sh("true")
	if _, err := os.Lstat(canary); err == nil {
		t.Fatalf("the daemon created %s through a symlink the sandbox planted", canary)
	}
}
