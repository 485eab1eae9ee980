package session

import (
	"context"
	"errors"
	"strings"

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

// Lost is told (by the cluster node, from its lease renewal) that another
// node took a resource over. For a session, this node was cut off from the
// store for longer than the lease and has healed: its worker here goes (a
// turn it still runs is aborted; the run row fences its writes), and the
// sandbox it ran for the session is destroyed, as dropMovedSandboxes does
// at start for a node that was down — the new owner runs the session in a
// sandbox of its own, seeded from the last checkpoint's workspace, and
// never comes back to this one. It returns at once; the work runs beside.
func (r *Runtime) Lost(resource string) {
	sid, ok := strings.CutPrefix(resource, "session/")
	if !ok {
		return
	}
	r.mu.Lock()
	if r.stopped || r.ctx == nil {
		r.mu.Unlock()
		return
	}
	w := r.workers[sid]
	if w != nil && !w.running {
		r.remove(w)
	}
	ctx := r.ctx
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		if w != nil {
			w.abortTurn(errLostRow)
			w.waitTurn(ctx)
		}
		r.dropSandboxesOf(ctx, sid)
	}()
}

// dropSandboxesOf destroys this node's sandboxes made for a session this
// node lost, unless the session came back here meanwhile.
func (r *Runtime) dropSandboxesOf(ctx context.Context, sid string) {
	if r.cfg.Sandboxes == nil {
		return
	}
	here, err := r.cfg.Sandboxes.ListHere(ctx)
	if err != nil {
		r.log.WarnContext(ctx, "list this node's sandboxes for a session another node took over", "session", sid, "err", err)
		return
	}
	for _, in := range here {
		if in.Metadata[sessionMeta] != sid || in.State == sandbox.StateDestroyed {
			continue
		}
		if r.cfg.Holds != nil && r.cfg.Holds(sid) {
			return // back here: its sandbox is its own again
		}
		if _, err := r.cfg.Sandboxes.Destroy(ctx, in.TenantID, in.ID); err != nil {
			r.log.WarnContext(ctx, "destroy the sandbox of a session another node took over", "session", sid, "sandbox", in.ID, "err", err)
			continue
		}
		r.log.InfoContext(ctx, "session taken over by another node while this one was cut off: its sandbox here destroyed",
			"session", sid, "sandbox", in.ID)
	}
}
