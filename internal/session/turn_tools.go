package session

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/agentkernel/agentkernel/internal/mcp"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/tools"
)

// runAllowed gives a result to every open tool use that needs nothing from
// the user: built-in tools that run without confirmation, confirmed ones
// (run) and refused ones (the deny message), and unknown tools (an error).
// Custom tools and unconfirmed calls stay open.
// step is the model step the calls belong to (their op journal position).
func (w *worker) runAllowed(ctx context.Context, ts *turnState, step int64) error {
	var todo []*call
	for _, cl := range w.conv.open {
		if !cl.waits() {
			todo = append(todo, cl)
		}
	}
	for i, cl := range todo {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var (
			text    string
			isError bool
			err     error
			content []map[string]any
			done    *store.EventOp // the call's op_completed, stored with its result
		)
		switch {
		case cl.ask && cl.decision != "allow":
			text, isError = "The user denied this tool call.", true
			if cl.denyMessage != "" {
				text += " " + cl.denyMessage
			}
		case cl.mcp:
			var res *mcp.Result
			if res, err = w.runMCP(ctx, ts, cl, step); err == nil {
				content, isError = res.Content, res.IsError
			}
		case ts.tools.Kind(cl.name) == tools.KindDaemon:
			text, isError, err = w.runThreadTool(ctx, ts, cl, step)
		case ts.tools.Kind(cl.name) != tools.KindBuiltin:
			text, isError = fmt.Sprintf("Unknown tool %q: this agent has no such tool.", cl.name), true
		default:
			text, isError, done, err = w.runTool(ctx, ts, cl, step)
		}
		if err != nil && ctx.Err() != nil {
			text, isError, content = "The tool call was interrupted.", true, nil
		}
		if content == nil {
			content = textContent(text)
		}
		ev := resultEvent(cl, content, isError)
		ev.Op = done
		var aerr error
		if (i == len(todo)-1 || ts.dirty) && err == nil {
			// The step's last result closes the step, and the result of a
			// tool that may have written is a boundary too: each is stored
			// with its checkpoint (and the workspace's snapshot), in one
			// transaction, so a fork at any tool result gets the workspace
			// exactly as it was there.
			aerr = w.commitStep(context.WithoutCancel(ctx), ts, step, []store.NewEvent{ev})
		} else {
			var evs []store.SessionEvent
			if evs, aerr = w.r.cfg.Events.Append(context.WithoutCancel(ctx), w.id, []store.NewEvent{ev}); aerr == nil {
				w.appended(ctx, evs)
			}
		}
		if aerr != nil {
			return aerr
		}
		if done != nil {
			w.r.failpoint(FailAfterToolResult)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// runDecided runs the calls whose confirmation arrived while the session
// was idle (a resumed turn).
func (w *worker) runDecided(ctx context.Context, ts *turnState) error {
	if len(w.conv.decided()) == 0 {
		return nil
	}
	// Step 0: before the turn's first model request.
	return w.runAllowed(ctx, ts, 0)
}

// runTool runs a built-in tool in the session's sandbox as a journalled
// op (see journalledTool). A failing tool is a result with isError; err
// means the call could not be made (the turn ends with session.error).
// done is the call's op_completed, for its result event to carry.
func (w *worker) runTool(ctx context.Context, ts *turnState, cl *call, step int64) (string, bool, *store.EventOp, error) {
	r := w.r
	if r.cfg.Sandboxes == nil {
		return "", false, nil, errors.New("this agentkernel runs without a sandbox layer: built-in tools are unavailable")
	}
	sbID, err := w.ensureSandbox(ctx, ts)
	if err != nil {
		return "", false, nil, err
	}
	if err := r.prepareContext(ctx, ts.s, sbID); err != nil {
		return "", false, nil, err
	}
	if !readOnlyTools[cl.name] {
		ts.dirty = true
	}
	res, done, err := w.journalledTool(ctx, ts, cl, step, sbID)
	if err != nil {
		return "", false, nil, fmt.Errorf("tool %s in sandbox %s: %w", cl.name, sbID, err)
	}
	return res.Content, res.IsError, done, nil
}

// ensureSandbox returns the session's sandbox, creating it at the first
// tool call (SessionKey = session id, Environment = environment id) with
// the environment's agentkernel.* metadata over the [sandbox] defaults.
func (w *worker) ensureSandbox(ctx context.Context, ts *turnState) (string, error) {
	r := w.r
	id := ts.s.SandboxID
	if id == "" {
		if cur, err := r.cfg.Store.GetManagedSession(ctx, w.id); err == nil && cur.SandboxID != "" {
			ts.s, id = cur, cur.SandboxID
		}
	}
	if id != "" {
		if ts.sandboxHere == id {
			return id, nil
		}
		if err := r.cfg.Sandboxes.Here(ctx, ts.s.TenantID, id); !errors.Is(err, sandbox.ErrElsewhere) || ts.s.ThreadOf != "" {
			ts.sandboxHere = id
			return id, nil
		}
		// The session moved here from another node of the cluster (it
		// died, or was cut off): its sandbox there is out of reach, so a
		// sandbox of this node takes over, from the workspace of the
		// last checkpoint (else the latest backup of the session's key).
		r.log.InfoContext(ctx, "session moved to this node: a new sandbox replaces the one on the other node", "session", w.id, "sandbox", id)
		ts.movedFrom = id
	}
	if ts.s.ThreadOf != "" {
		// A thread works in its parent's sandbox, which the parent made
		// before it opened the thread.
		p, err := r.cfg.Store.GetManagedSession(ctx, ts.s.ThreadOf)
		if err != nil {
			return "", fmt.Errorf("the thread's session %s: %w", ts.s.ThreadOf, err)
		}
		if p.SandboxID == "" {
			return "", fmt.Errorf("the thread's session %s has no sandbox", ts.s.ThreadOf)
		}
		s, err := r.updateSession(context.WithoutCancel(ctx), w.id, func(s *store.ManagedSession) bool {
			s.SandboxID = p.SandboxID
			return true
		})
		if err != nil {
			return "", err
		}
		ts.s = s
		return p.SandboxID, nil
	}
	var spec EnvSandbox
	meta := map[string]string{}
	if ts.s.EnvironmentID != "" {
		env, err := r.cfg.Store.GetEnvironment(ctx, ts.s.EnvironmentID)
		if err != nil {
			return "", fmt.Errorf("environment %s: %w", ts.s.EnvironmentID, err)
		}
		if spec, err = parseEnvironment(env); err != nil {
			return "", err
		}
		if r.cfg.Packages != nil {
			layer, err := r.cfg.Packages.Layer(ctx, env, spec.Driver, spec.Image)
			if err != nil {
				return "", fmt.Errorf("environment %s: %w", env.ID, err)
			}
			maps.Copy(meta, layer)
		}
	}
	meta[sessionMeta] = w.id
	var seed func(context.Context, string) error
	if snap := ts.workspace; id != "" && snap != "" && snap != WorkspaceUnknown && r.cfg.Workspaces != nil {
		seed = r.cfg.Workspaces.Seeder(snap)
	} else if snap := ts.s.Lineage.WorkspaceSeed; snap != "" && id == "" {
		// A fork or a rewound session: its workspace starts as the
		// snapshot its lineage names.
		if snap == WorkspaceUnknown || r.cfg.Workspaces == nil {
			return "", fmt.Errorf("the session's workspace starts from snapshot %q, which this daemon cannot restore", snap)
		}
		seed = r.cfg.Workspaces.Seeder(snap)
	}
	info, err := r.cfg.Sandboxes.Create(ctx, sandbox.CreateParams{
		TenantID: ts.s.TenantID, Driver: spec.Driver, Image: spec.Image, Network: spec.Network,
		Limits: spec.Limits, SleepAfter: spec.SleepAfter, Environment: ts.s.EnvironmentID, SessionKey: w.id,
		Metadata: meta, Seed: seed,
	})
	if err != nil {
		return "", fmt.Errorf("create the session's sandbox: %w", err)
	}
	s, err := r.updateSession(context.WithoutCancel(ctx), w.id, func(s *store.ManagedSession) bool {
		s.SandboxID = info.ID
		return true
	})
	if err != nil {
		return "", err
	}
	ts.s, ts.sandboxHere = s, info.ID
	r.log.InfoContext(ctx, "session sandbox created", "session", w.id, "sandbox", info.ID, "driver", info.Driver)
	return info.ID, nil
}
