package process

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/sandbox/sandboxtest"
)

// TestPooledSandboxLivesOnlyAsLongAsItsPipeUntilAssigned: a sandbox
// started with a pool pipe ends when the pipe's write end closes before
// it is assigned; once adopted under a new id and run dir and assigned,
// it runs on without the pipe, answers on the renamed socket, and its
// commands get the assigned environment.
func TestPooledSandboxLivesOnlyAsLongAsItsPipeUntilAssigned(t *testing.T) {
	requireBwrap(t)
	guestBin := sandboxtest.BuildGuest(t)
	d, err := New(Config{GuestArgs: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := func(id string) (sandbox.Spec, *sandbox.Handle, *os.File) {
		t.Helper()
		run, err := os.MkdirTemp("", "akpool")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(run) })
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		spec := sandbox.Spec{ID: id, WorkspaceDir: t.TempDir(), RunDir: run, GuestBinary: guestBin, Secret: guest.NewSecret(), PoolPipe: r}
		h, err := d.Start(ctx, spec)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Destroy(ctx, h) })
		c := sandboxtest.Client(d, h)
		defer c.Close()
		sandboxtest.WaitHealthy(t, c)
		return spec, h, w
	}
	running := func(h *sandbox.Handle) bool {
		st, err := d.Inspect(ctx, h)
		return err == nil && st.Running
	}

	// Unassigned: closing the pipe ends it.
	_, h, w := start("wrm-unassigned")
	w.Close()
	deadline := time.Now().Add(15 * time.Second)
	for running(h) {
		if time.Now().After(deadline) {
			t.Fatal("an unassigned pooled sandbox outlived its pool pipe")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Assigned: it outlives the pipe.
	spec, h, w := start("wrm-assigned")
	newRun := filepath.Join(filepath.Dir(spec.RunDir), filepath.Base(spec.RunDir)+"-sbx")
	if err := os.Rename(spec.RunDir, newRun); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(newRun) })
	h2, err := d.Adopt(ctx, h, sandbox.Spec{ID: "sbx-adopted", RunDir: newRun})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Destroy(ctx, h2) })
	c := sandboxtest.Client(d, h2)
	defer c.Close()
	if err := c.Assign(ctx, map[string]string{"ASSIGNED": "yes"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Assign(ctx, nil); err == nil {
		t.Fatal("a second assignment was accepted")
	}
	w.Close()
	time.Sleep(200 * time.Millisecond) // long enough for an unassigned guest to end (above)
	if !running(h2) {
		t.Fatal("an assigned sandbox ended with its pool pipe")
	}
	out, _, res, err := c.ExecOutput(ctx, guest.ExecRequest{Shell: `echo "$ASSIGNED"`})
	if err != nil || res.ExitCode != 0 || string(out) != "yes\n" {
		t.Fatalf("exec after assignment: %q %+v %v", out, res, err)
	}
}

// TestKillStartingEndsABwrapLeftBlocked: a bwrap still blocked before its
// guest runs (the daemon died between starting it and letting it go) is
// found by the workspace it binds and killed; another bwrap is not.
func TestKillStartingEndsABwrapLeftBlocked(t *testing.T) {
	requireBwrap(t)
	d, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	start := func(ws string) (*exec.Cmd, *os.File) {
		t.Helper()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(d.bwrap, "--ro-bind", "/", "/", "--bind", ws, "/workspace", "--block-fd", "3", "--", "true")
		cmd.ExtraFiles = []*os.File{r}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r.Close()
		t.Cleanup(func() { w.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd, w
	}
	target, other := t.TempDir(), t.TempDir()
	victim, _ := start(target)
	bystander, _ := start(other)
	done := make(chan error, 1)
	go func() { done <- victim.Wait() }()
	time.Sleep(100 * time.Millisecond) // let both reach their block
	if err := d.KillStarting(context.Background(), target); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the blocked bwrap on the pooled workspace still runs")
	}
	if err := bystander.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the other bwrap was killed too: %v", err)
	}
}
