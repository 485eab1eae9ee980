package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/agentkernel/agentkernel/internal/store"
)

// AppendAgentEvents implements store.MonitorStore. In one transaction it
// reads the sandbox's summary (whose last_seq is the Seq counter), inserts
// the batch with the next Seqs, folds it into the summary and writes the
// summary back; SQLite's single writer serialises concurrent appends, so
// Seq stays dense and the summary equals a fold of the events.
func (s *Store) AppendAgentEvents(ctx context.Context, p store.AppendAgentEventsParams) ([]store.AgentEvent, error) {
	if p.SandboxID == "" {
		return nil, fmt.Errorf("append agent events: empty sandbox id: %w", store.ErrInvalid)
	}
	for i, ev := range p.Events {
		if err := store.CheckAgentEvent(p.SandboxID, i, ev); err != nil {
			return nil, err
		}
	}
	received := orNow(p.ReceivedAt, s.timestamp())
	out := make([]store.AgentEvent, len(p.Events))
	if len(p.Events) == 0 {
		return out, nil
	}
	err := s.inTx(ctx, func(tx *wtx) error {
		a, err := scanActivity(tx.QueryRowContext(ctx, `SELECT `+activityCols+` FROM agent_activity WHERE sandbox_id = ?`, p.SandboxID))
		if errors.Is(err, sql.ErrNoRows) {
			a, err = &store.AgentActivity{SandboxID: p.SandboxID}, nil
		}
		if err != nil {
			return fmt.Errorf("sqlite: read activity of sandbox %q: %w", p.SandboxID, err)
		}
		for i, ev := range p.Events {
			row := store.AgentEvent{SandboxID: p.SandboxID, Seq: a.LastSeq + 1, Type: ev.Type,
				HeartbeatStatus: ev.HeartbeatStatus, Payload: ev.Payload,
				OccurredAt: orNow(ev.OccurredAt, received), ReceivedAt: received}
			payload, _ := jsonValue("payload", ev.Payload) // checked above
			if _, err := tx.ExecContext(ctx, `INSERT INTO agent_events (`+agentEventCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				row.SandboxID, row.Seq, row.Type, row.HeartbeatStatus, payload,
				micros(row.OccurredAt), micros(row.ReceivedAt)); err != nil {
				return fmt.Errorf("sqlite: insert agent event %d of sandbox %q: %w", row.Seq, p.SandboxID, err)
			}
			a.Apply(row)
			out[i] = row
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO agent_activity (`+activityCols+`)
			VALUES (?`+strings.Repeat(", ?", 19)+`)`, activityArgs(a)...); err != nil {
			return fmt.Errorf("sqlite: write activity of sandbox %q: %w", p.SandboxID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListAgentEvents implements store.MonitorStore in Seq order.
func (s *Store) ListAgentEvents(ctx context.Context, p store.ListAgentEventsParams) ([]store.AgentEvent, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+agentEventCols+` FROM agent_events
		WHERE sandbox_id = ? AND seq > ? ORDER BY seq LIMIT ?`, p.SandboxID, p.AfterSeq, noLimit(p.Limit))
	if err != nil {
		return nil, fmt.Errorf("sqlite: list agent events of sandbox %q: %w", p.SandboxID, err)
	}
	return collect(rows, "agent events", scanAgentEvent)
}

// GetActivity implements store.MonitorStore.
func (s *Store) GetActivity(ctx context.Context, sandboxID string) (*store.AgentActivity, error) {
	a, err := scanActivity(s.read.QueryRowContext(ctx, `SELECT `+activityCols+` FROM agent_activity
		WHERE sandbox_id = ?`, sandboxID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("activity of sandbox %q: %w", sandboxID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get activity of sandbox %q: %w", sandboxID, err)
	}
	return a, nil
}

// ListActivities implements store.MonitorStore in sandbox id order.
func (s *Store) ListActivities(ctx context.Context, p store.ListActivitiesParams) ([]*store.AgentActivity, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+activityCols+` FROM agent_activity
		WHERE (? OR terminated_at IS NULL) AND sandbox_id > ? ORDER BY sandbox_id LIMIT ?`,
		p.IncludeTerminated, p.AfterSandboxID, noLimit(p.Limit))
	if err != nil {
		return nil, fmt.Errorf("sqlite: list activities: %w", err)
	}
	return collect(rows, "activities", scanActivity)
}
