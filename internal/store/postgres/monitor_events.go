package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

// AppendAgentEvents implements store.MonitorStore in one transaction: an
// upsert of the sandbox's summary takes its row lock (so concurrent appends
// to one sandbox queue) and returns it, the batch is folded into it with
// the next Seqs, and the events and the new summary are written in one
// pipelined round trip. Seq stays dense and the summary equals a fold of
// the events.
func (s *Store) AppendAgentEvents(ctx context.Context, p store.AppendAgentEventsParams) ([]store.AgentEvent, error) {
	if p.SandboxID == "" {
		return nil, fmt.Errorf("append agent events: empty sandbox id: %w", store.ErrInvalid)
	}
	for i, ev := range p.Events {
		if err := store.CheckAgentEvent(p.SandboxID, i, ev); err != nil {
			return nil, err
		}
	}
	received := orNow(p.ReceivedAt, s.clock())
	n := len(p.Events)
	out := make([]store.AgentEvent, n)
	if n == 0 {
		return out, nil
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		a, err := scanActivity(tx.QueryRow(ctx, `INSERT INTO agent_activity
			(sandbox_id, first_event_at, last_event_at, last_received_at, last_seq, updated_at)
			VALUES ($1, $2, $2, $2, 0, $2)
			ON CONFLICT (sandbox_id) DO UPDATE SET last_seq = agent_activity.last_seq
			RETURNING `+activityCols, p.SandboxID, received))
		if err != nil {
			return mapErr("lock activity of sandbox "+p.SandboxID, err)
		}
		var (
			seqs                   = make([]int64, n)
			types, statuses        = make([]string, n), make([]string, n)
			payloads               = make([]*string, n)
			occurred, receivedCols = make([]time.Time, n), make([]time.Time, n)
		)
		for i, ev := range p.Events {
			row := store.AgentEvent{SandboxID: p.SandboxID, Seq: a.LastSeq + 1, Type: ev.Type,
				HeartbeatStatus: ev.HeartbeatStatus,
				OccurredAt:      orNow(ev.OccurredAt, received), ReceivedAt: received}
			if raw, _ := jsonArg("payload", ev.Payload); raw != nil { // checked above
				v := raw.(string)
				payloads[i], row.Payload = &v, ev.Payload
			}
			a.Apply(row)
			out[i] = row
			seqs[i], types[i], statuses[i] = row.Seq, row.Type, string(row.HeartbeatStatus)
			occurred[i], receivedCols[i] = row.OccurredAt, row.ReceivedAt
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO agent_events (`+agentEventCols+`)
			SELECT $1, u.seq, u.type, u.status, u.payload::json, u.occurred, u.received
			FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[])
				AS u(seq, type, status, payload, occurred, received)`,
			p.SandboxID, seqs, types, statuses, payloads, occurred, receivedCols)
		b.Queue(`UPDATE agent_activity SET first_event_at = $2, last_event_at = $3, last_received_at = $4,
			last_seq = $5, started_at = $6, first_heartbeat_at = $7, last_heartbeat_at = $8,
			last_heartbeat_status = $9, last_work_event_at = $10, last_work_event_seq = $11,
			last_work_event_type = $12, latest_completed_at = $13, latest_completed_seq = $14,
			event_count = $15, heartbeat_count = $16, work_event_count = $17, completed_count = $18,
			updated_at = $19 WHERE sandbox_id = $1`,
			a.SandboxID, a.FirstEventAt, a.LastEventAt, a.LastReceivedAt, a.LastSeq, a.StartedAt,
			a.FirstHeartbeatAt, a.LastHeartbeatAt, string(a.LastHeartbeatStatus), a.LastWorkEventAt,
			a.LastWorkEventSeq, a.LastWorkEventType, a.LatestCompletedAt, a.LatestCompletedSeq, a.EventCount,
			a.HeartbeatCount, a.WorkEventCount, a.CompletedCount, a.UpdatedAt)
		return mapErr("append agent events to sandbox "+p.SandboxID, tx.SendBatch(ctx, b).Close())
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListAgentEvents implements store.MonitorStore in Seq order.
func (s *Store) ListAgentEvents(ctx context.Context, p store.ListAgentEventsParams) ([]store.AgentEvent, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+agentEventCols+` FROM agent_events
		WHERE sandbox_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, p.SandboxID, p.AfterSeq, limitArg(p.Limit))
	if err != nil {
		return nil, mapErr("list agent events of sandbox "+p.SandboxID, err)
	}
	return collect(rows, "agent events", scanAgentEvent)
}

// GetActivity implements store.MonitorStore.
func (s *Store) GetActivity(ctx context.Context, sandboxID string) (*store.AgentActivity, error) {
	a, err := scanActivity(s.pool.QueryRow(ctx, `SELECT `+activityCols+` FROM agent_activity
		WHERE sandbox_id = $1`, sandboxID))
	if err != nil {
		return nil, mapErr("get activity of sandbox "+sandboxID, err)
	}
	return a, nil
}

// ListActivities implements store.MonitorStore in sandbox id order.
func (s *Store) ListActivities(ctx context.Context, p store.ListActivitiesParams) ([]*store.AgentActivity, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+activityCols+` FROM agent_activity
		WHERE ($1 OR terminated_at IS NULL) AND sandbox_id > $2 ORDER BY sandbox_id LIMIT $3`,
		p.IncludeTerminated, p.AfterSandboxID, limitArg(p.Limit))
	if err != nil {
		return nil, mapErr("list activities", err)
	}
	return collect(rows, "activities", scanActivity)
}
