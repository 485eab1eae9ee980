package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ErrBadEvent marks an event the monitor refuses; the message names the
// field or limit.
var ErrBadEvent = errors.New("bad agent event")

// MaxEventBatch bounds one ingest call.
const MaxEventBatch = 1000

// EventInput is an event as an agent or an API client sends it.
type EventInput struct {
	Type   string          `json:"type"`
	Status string          `json:"status,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
	// At is the agent's timestamp (optional). It may not be in the future
	// beyond the configured skew.
	At *time.Time `json:"at,omitempty"`
}

// Validate checks one event against the seed's types and the limits.
func (s *Service) Validate(i int, ev EventInput, now time.Time) error {
	field := func(name string) string { return fmt.Sprintf("events[%d].%s", i, name) }
	if !store.IsAgentEventType(ev.Type) {
		return fmt.Errorf("%w: %s: %q is not an agent event type (work: %v; non-work: %v)",
			ErrBadEvent, field("type"), ev.Type, store.WorkEventTypes(), store.NonWorkEventTypes())
	}
	if ev.Type == store.EventHeartbeat && !store.HeartbeatStatus(ev.Status).Valid() {
		return fmt.Errorf("%w: %s: %q; an agent.heartbeat needs idle, running, degraded or failed", ErrBadEvent, field("status"), ev.Status)
	}
	if ev.Type != store.EventHeartbeat && ev.Status != "" {
		return fmt.Errorf("%w: %s: only agent.heartbeat carries a status, not %s", ErrBadEvent, field("status"), ev.Type)
	}
	if len(ev.Data) > s.cfg.MaxEventBytes {
		return fmt.Errorf("%w: %s is %d bytes; the limit is %d (monitor.max_event_bytes)", ErrBadEvent, field("data"), len(ev.Data), s.cfg.MaxEventBytes)
	}
	if len(ev.Data) > 0 && !json.Valid(ev.Data) {
		return fmt.Errorf("%w: %s is not valid JSON", ErrBadEvent, field("data"))
	}
	if ev.At != nil && ev.At.After(now.Add(s.cfg.EventSkew)) {
		return fmt.Errorf("%w: %s: %s is %s in the future; the allowed clock skew is %s (monitor.event_skew)",
			ErrBadEvent, field("at"), ev.At.UTC().Format(time.RFC3339Nano), ev.At.Sub(now).Round(time.Millisecond), s.cfg.EventSkew)
	}
	return nil
}

// Ingest validates a batch (all or nothing) and appends it in order to the
// sandbox's events. Times are the daemon's clock at receipt unless the
// client gave its own At: the guest's relay gives none, so every decision
// compares times of one clock.
func (s *Service) Ingest(ctx context.Context, sandboxID string, evs []EventInput) ([]store.AgentEvent, error) {
	if len(evs) == 0 || len(evs) > MaxEventBatch {
		return nil, fmt.Errorf("%w: events: a batch holds 1 to %d events, got %d", ErrBadEvent, MaxEventBatch, len(evs))
	}
	now := s.clock.Now()
	batch := make([]store.NewAgentEvent, len(evs))
	for i, ev := range evs {
		if err := s.Validate(i, ev, now); err != nil {
			return nil, err
		}
		batch[i] = store.NewAgentEvent{Type: ev.Type, HeartbeatStatus: store.HeartbeatStatus(ev.Status), Payload: ev.Data}
		if ev.At != nil {
			batch[i].OccurredAt = *ev.At
		}
	}
	return s.st.AppendAgentEvents(ctx, store.AppendAgentEventsParams{SandboxID: sandboxID, Events: batch, ReceivedAt: now})
}
