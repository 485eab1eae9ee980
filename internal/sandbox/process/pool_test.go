package process

import (
	"context"
	"os"
	"path/filepath"
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
