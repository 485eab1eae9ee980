package guest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A guest with a runtime dir keeps op records and agent events there, not
// in the workspace, and the records an earlier version left in the
// workspace move there when it starts: a finished op keeps its result, an
// accepted one with no result stays ambiguous, neither runs again, and an
// unpulled agent event is still delivered.
func TestRuntimeRecordsMoveOutOfTheWorkspace(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	work := filepath.Join(dir, "workspace")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		SocketPath: filepath.Join(dir, "guest.sock"), AgentSocketPath: filepath.Join(dir, "agent.sock"),
		Secret: testSecret, StateDir: filepath.Join(dir, "state"), WorkDir: work,
	}
	// The earlier layout: records in the workspace.
	c, stop := serveGuest(t, cfg)
	done, gone := testOpID(1), testOpID(2)
	if res, err := c.Exec(ctx, ExecRequest{OpID: done, Shell: "echo once >> ran.txt; echo out"}, nil); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if _, err := c.PostAgentEvents(ctx, []AgentEvent{{Type: "agent.started"}}); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := os.MkdirAll(filepath.Join(work, runtimeDirName, opsDir, gone), 0o700); err != nil {
		t.Fatal(err)
	}

	cfg.RuntimeDir = filepath.Join(dir, "runtime")
	c, stop = serveGuest(t, cfg)
	defer stop()
	if st := mustOp(t, c, done); st.State != OpStateFinished || string(st.Result.Stdout) != "out\n" {
		t.Fatalf("finished op after the move: %+v", st)
	}
	if st := mustOp(t, c, gone); st.State != OpStateAcceptedGone {
		t.Fatalf("accepted op after the move: %+v", st)
	}
	if _, err := c.Exec(ctx, ExecRequest{OpID: done, Shell: "echo once >> ran.txt"}, nil); !errors.Is(err, ErrOpExists) {
		t.Fatalf("the moved op ran again: %v", err)
	}
	if evs, err := c.PullAgentEvents(ctx, 0, 0); err != nil || len(evs) != 1 || evs[0].Type != "agent.started" {
		t.Fatalf("unpulled event after the move: %+v %v", evs, err)
	}
	if _, err := c.Exec(ctx, ExecRequest{OpID: testOpID(3), Shell: "true"}, nil); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(work)
	if len(entries) != 1 || entries[0].Name() != "ran.txt" {
		t.Fatalf("the workspace holds %v, want only the command's own file", entries)
	}
	if _, err := os.Stat(filepath.Join(cfg.RuntimeDir, opsDir, testOpID(3), "result.json")); err != nil {
		t.Fatalf("new op record not in the runtime dir: %v", err)
	}
}
