package session

import (
	"context"
	"errors"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// Sessions on several daemons (issue 16): only the node holding a
// session's lease runs its turns (RuntimeConfig.Owns). A node that takes
// a session over from a dead one gives it a sandbox of its own, seeded
// from the last checkpoint's workspace (ensureSandbox).

// sessionMeta is the sandbox metadata key naming the session a sandbox
// was made for.
const sessionMeta = "agentkernel.session"

// dropMovedSandboxes destroys, at start, the sandboxes of this node whose
// session moved to another node while this one was down: the session
// names a sandbox of that node now, and never comes back to this one
// (a session that moves here again gets a new sandbox from its last
// checkpoint). Alone, or with no sandboxes, it does nothing.
func (r *Runtime) dropMovedSandboxes(ctx context.Context) {
	if r.cfg.Owns == nil || r.cfg.Sandboxes == nil {
		return
	}
	here, err := r.cfg.Sandboxes.ListHere(ctx)
	if err != nil {
		r.log.WarnContext(ctx, "list this node's sandboxes for sessions that moved", "err", err)
		return
	}
	for _, in := range here {
		sid := in.Metadata[sessionMeta]
		if sid == "" {
			continue
		}
		s, err := r.cfg.Store.GetManagedSession(ctx, sid)
		if err != nil || s.SandboxID == "" || s.SandboxID == in.ID {
			continue
		}
		if !errors.Is(r.cfg.Sandboxes.Here(ctx, s.TenantID, s.SandboxID), sandbox.ErrElsewhere) {
			continue
		}
		if _, err := r.cfg.Sandboxes.Destroy(ctx, in.TenantID, in.ID); err != nil {
			r.log.WarnContext(ctx, "destroy the sandbox of a session that moved to another node", "session", sid, "sandbox", in.ID, "err", err)
			continue
		}
		r.log.InfoContext(ctx, "session moved to another node while this one was down: its sandbox here destroyed",
			"session", sid, "sandbox", in.ID, "now", s.SandboxID)
	}
}
