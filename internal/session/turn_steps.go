package session

import (
	"context"
	"errors"

	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Steps and their checkpoints (one session model, issue 13). Every step
// boundary — the last tool result of a model step, and the turn's end — is
// a checkpoint written in the same transaction as its events, naming the
// workspace snapshot taken there. Fork and rewind start from these.

// readOnlyTools never change the workspace: a step that ran only these
// reuses the previous snapshot.
var readOnlyTools = map[string]bool{"read": true, "glob": true, "grep": true}

// WorkspaceUnknown is the workspace of a checkpoint whose snapshot failed:
// the workspace at that point is not known, and nothing starts from it.
const WorkspaceUnknown = "unknown"

// startWorkspace sets the turn's last known workspace snapshot: the latest
// checkpoint's, else the one the session's sandbox starts from.
func (w *worker) startWorkspace(ctx context.Context, ts *turnState) {
	// A recovered turn may have run tools after its last checkpoint.
	ts.dirty = ts.recovered
	if w.workspaceKnown && !ts.recovered {
		ts.workspace = w.workspace
		return
	}
	ts.workspace = ts.s.Lineage.WorkspaceSeed
	cp, err := w.r.cfg.Store.GetLatestCheckpoint(ctx, w.id)
	switch {
	case err == nil:
		ts.workspace = cp.Workspace
	case !errors.Is(err, store.ErrNotFound):
		w.r.log.WarnContext(ctx, "latest checkpoint", "session", w.id, "err", err)
		ts.workspace = WorkspaceUnknown
	}
	w.workspace, w.workspaceKnown = ts.workspace, true
}

// snapshot returns the workspace snapshot for a checkpoint here: a new one
// when a tool that may write ran since the last, else the last.
func (w *worker) snapshot(ctx context.Context, ts *turnState) string {
	r := w.r
	if !ts.dirty || r.cfg.Workspaces == nil {
		return ts.workspace
	}
	sbID := ts.s.SandboxID
	if sbID == "" {
		if cur, err := r.cfg.Store.GetManagedSession(ctx, w.id); err == nil {
			sbID = cur.SandboxID
		}
	}
	if sbID == "" {
		return ts.workspace
	}
	id, err := r.cfg.Workspaces.Snapshot(ctx, ts.s.TenantID, sbID)
	if errors.Is(err, sandbox.ErrElsewhere) {
		// The session moved here from another node of the cluster and
		// has no sandbox here yet: every tool result that may have
		// written is a checkpoint of its own, so the last one still
		// holds the workspace of every result in the log.
		ts.dirty = false
		return ts.workspace
	}
	if err != nil {
		r.log.WarnContext(ctx, "workspace snapshot at a step boundary", "session", w.id, "sandbox", sbID, "err", err)
		id = WorkspaceUnknown
	}
	ts.workspace, ts.dirty = id, false
	w.workspace, w.workspaceKnown = id, true
	return id
}

// commitStep stores the step's closing events with its checkpoint and
// publishes them.
func (w *worker) commitStep(ctx context.Context, ts *turnState, step int64, evs []store.NewEvent) error {
	r := w.r
	out, _, err := r.cfg.Store.CommitStep(ctx, store.StepCommit{SessionID: w.id, Owner: r.cfg.Owner,
		Events: evs, Step: step, Workspace: w.snapshot(ctx, ts)})
	if err != nil {
		return err
	}
	r.cfg.Events.Publish(w.id, out)
	w.appended(ctx, out)
	return nil
}
