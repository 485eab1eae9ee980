package session

import (
	"context"
	"strings"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ContextHook is a layer that puts into a session's sandbox what the
// session brings beyond its workspace — resources (files, repositories,
// memory stores), the agent's skills, the environment's packages — and
// takes back what the agent leaves there (output files, memory changes).
// The runtime calls every hook of RuntimeConfig.Context, in order; it knows
// none of them.
type ContextHook interface {
	// Prepare runs before every tool call, once the session's sandbox
	// exists: it brings what the sandbox shows up to date with the
	// session's resources as they are now (added ones appear, removed ones
	// disappear). It must be idempotent and cheap when nothing changed. An
	// error fails the tool call; the turn ends with a session.error that
	// carries the error's text, so it should name the resource.
	Prepare(ctx context.Context, s *store.ManagedSession, sandboxID string) error
	// TurnEnd runs when a turn ends, before its session.status_idle is
	// appended, if the session has a sandbox. It takes back what the turn
	// left (outputs → Files, memory changes → memory versions). It must be
	// safe to run again for the same turn (a crash before status_idle runs
	// it again at recovery); an error is logged and the turn still ends.
	TurnEnd(ctx context.Context, s *store.ManagedSession, sandboxID string) error
	// SystemPrompt returns text for the system prompt of the session's
	// model calls (skills' descriptions, memory stores' instructions), or
	// "". It is called once per turn.
	SystemPrompt(ctx context.Context, s *store.ManagedSession) (string, error)
}

// prepareContext runs every hook's Prepare for sandboxID.
func (r *Runtime) prepareContext(ctx context.Context, s *store.ManagedSession, sandboxID string) error {
	for _, h := range r.cfg.Context {
		if err := h.Prepare(ctx, s, sandboxID); err != nil {
			return err
		}
	}
	return nil
}

// turnEndContext runs every hook's TurnEnd; errors are logged.
func (r *Runtime) turnEndContext(ctx context.Context, s *store.ManagedSession) {
	if s == nil || s.SandboxID == "" {
		return
	}
	for _, h := range r.cfg.Context {
		if err := h.TurnEnd(ctx, s, s.SandboxID); err != nil {
			r.log.WarnContext(ctx, "session context at turn end", "session", s.ID, "sandbox", s.SandboxID, "err", err)
		}
	}
}

type selfHostedKey struct{}

// WithSelfHosted marks ctx as a turn of a self_hosted session: its tools
// run in a worker's directory, not in the daemon's sandbox, so a hook's
// system prompt names paths relative to the tools' working directory.
func WithSelfHosted(ctx context.Context) context.Context {
	return context.WithValue(ctx, selfHostedKey{}, true)
}

// SelfHostedTurn says whether ctx is a self_hosted session's turn.
func SelfHostedTurn(ctx context.Context) bool {
	v, _ := ctx.Value(selfHostedKey{}).(bool)
	return v
}

// systemPrompt is the agent's system prompt followed by what the hooks add,
// separated by blank lines.
func (r *Runtime) systemPrompt(ctx context.Context, s *store.ManagedSession, base string) (string, error) {
	parts := []string{}
	if base != "" {
		parts = append(parts, base)
	}
	for _, h := range r.cfg.Context {
		p, err := h.SystemPrompt(ctx, s)
		if err != nil {
			return "", err
		}
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "\n\n"), nil
}
