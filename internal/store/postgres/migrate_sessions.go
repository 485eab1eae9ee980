package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Before migration 0016 a Managed Agents session lived in its own tables:
// managed_sessions, session_events and run_rows. migrateSessions moves each
// into the one session model — the session row into sessions, its events
// into messages, its run row into runs, and the turns its log shows into
// finished runs — in ONE transaction per session, so a daemon killed
// half-way resumes with the sessions it had not moved yet. Once the old
// tables are empty they are dropped. The caller holds the migration lock.
func (s *Store) migrateSessions(ctx context.Context, conn *pgx.Conn) error {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('managed_sessions') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("postgres: look for the old session tables: %w", err)
	}
	if !exists {
		return nil
	}
	moved := 0
	for {
		rows, err := conn.Query(ctx, `SELECT id FROM managed_sessions ORDER BY id LIMIT 100`)
		if err != nil {
			return fmt.Errorf("postgres: list sessions to migrate: %w", err)
		}
		batch, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("postgres: list sessions to migrate: %w", err)
		}
		if len(batch) == 0 {
			break
		}
		for _, id := range batch {
			if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return s.moveSession(ctx, tx, id) }); err != nil {
				return fmt.Errorf("postgres: migrate session %s to the one session model: %w", id, err)
			}
			moved++
		}
	}
	if _, err := conn.Exec(ctx, `DROP TABLE run_rows, session_events, managed_sessions`); err != nil {
		return fmt.Errorf("postgres: drop the old session tables: %w", err)
	}
	s.log.Info("sessions migrated to the one session model", "sessions", moved)
	return nil
}

// moveSession moves one session within tx (see migrateSessions).
func (s *Store) moveSession(ctx context.Context, tx pgx.Tx, id string) error {
	tag, err := tx.Exec(ctx, `INSERT INTO sessions
		(id, tenant_id, kind, status, version, custom_state, runtime, agent_id, agent_version, environment_id,
		 doc, sandbox_id, usage, processed_seq, stop_reason, terminated_at, archived_at, message_count,
		 created_at, updated_at)
		SELECT id, tenant_id, 'managed', 'active', version, '{}', '{}', agent_id, agent_version, environment_id,
		 doc, sandbox_id, usage, processed_seq, stop_reason, terminated_at, archived_at, last_seq,
		 created_at, updated_at
		FROM managed_sessions WHERE id = $1 ON CONFLICT DO NOTHING`, id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("a session %s already exists in the sessions table: %w", id, store.ErrConflict)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO messages (session_id, seq, event_id, role, content, created_at)
		SELECT session_id, seq, id, type, data, created_at FROM session_events WHERE session_id = $1`, id); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `SELECT seq, type, created_at FROM session_events
		WHERE session_id = $1 AND (type LIKE 'user.%' OR type IN ('session.status_running', 'session.status_idle'))
		ORDER BY seq`, id)
	if err != nil {
		return err
	}
	type turn struct {
		turnSeq    int64
		start, end time.Time
	}
	var (
		turns    []turn
		open     *turn
		lastUser int64
		active   int64
	)
	for rows.Next() {
		var (
			seq int64
			typ string
			at  time.Time
		)
		if err := rows.Scan(&seq, &typ, &at); err != nil {
			rows.Close()
			return err
		}
		switch typ {
		case "session.status_running":
			if open == nil {
				open = &turn{turnSeq: lastUser, start: at}
			}
		case "session.status_idle":
			if open != nil {
				open.end = at
				active += max(0, at.Sub(open.start).Microseconds())
				turns = append(turns, *open)
				open = nil
			}
		default:
			lastUser = seq
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for i, t := range turns {
		if _, err := tx.Exec(ctx, `INSERT INTO runs (id, session_id, seq, status, start_sequence, turn_seq,
			created_at, updated_at, completed_at) VALUES ($1, $2, $3, 'completed', $4, $4, $5, $6, $6)`,
			ids.New("run"), id, i+1, t.turnSeq, t.start, t.end); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO runs (id, session_id, seq, status, start_sequence, turn_seq,
		owner, lease_expires_at, recovering, recovery_attempts, last_progress_seq, created_at, updated_at)
		SELECT $1, session_id, $2, 'running', turn_seq, turn_seq, owner, lease_expires_at, recovering,
		 recovery_attempts, last_progress_seq, started_at, updated_at FROM run_rows WHERE session_id = $3`,
		ids.New("run"), len(turns)+1, id); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE sessions SET active_us = $2,
		run_count = (SELECT COALESCE(MAX(seq), 0) FROM runs WHERE session_id = $1) WHERE id = $1`, id, active); err != nil {
		return err
	}
	// The cascade removes its session_events and run_rows.
	_, err = tx.Exec(ctx, `DELETE FROM managed_sessions WHERE id = $1`, id)
	return err
}
