package daemon

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/agentkernel/agentkernel/internal/api"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
)

// managedAPI builds the Managed Agents API's dependencies: the event log
// over the store and a runner slot the session runtime is plugged into.
// It returns nil when the store has no Managed Agents storage.
func newManagedAPI(st store.Store, log *slog.Logger) (*api.ManagedOptions, *session.EventLog, *runnerSlot) {
	ms, ok := st.(store.ManagedStore)
	if !ok {
		return nil, nil, nil
	}
	events := session.NewEventLog(ms, session.EventLogConfig{Log: log})
	slot := &runnerSlot{}
	return &api.ManagedOptions{Store: ms, Events: events, Runner: slot}, events, slot
}

// runnerSlot is the API's SessionRunner until and after the session
// runtime is plugged in: the API is built before the runtime (which needs
// the event log the API shares), so the runtime is set afterwards.
// Without a runtime, events are stored and streamed but no turn runs.
type runnerSlot struct {
	r atomic.Pointer[api.SessionRunner]
}

func (s *runnerSlot) set(r api.SessionRunner) { s.r.Store(&r) }

func (s *runnerSlot) Wake(sessionID string) {
	if r := s.r.Load(); r != nil {
		(*r).Wake(sessionID)
	}
}

func (s *runnerSlot) Destroy(ctx context.Context, tenantID, sessionID string) error {
	if r := s.r.Load(); r != nil {
		return (*r).Destroy(ctx, tenantID, sessionID)
	}
	return nil
}

// SetSessionRunner plugs the session runtime into the Managed Agents API:
// user events wake it and DELETE /v1/sessions/{id} destroys through it.
func (d *Daemon) SetSessionRunner(r api.SessionRunner) {
	if d.runner != nil {
		d.runner.set(r)
	}
}

// Events returns the session event log (nil without Managed Agents
// storage); the session runtime appends through it.
func (d *Daemon) Events() *session.EventLog { return d.events }
