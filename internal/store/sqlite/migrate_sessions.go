package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Before migration 0016 a Managed Agents session lived in its own tables:
// managed_sessions, session_events and run_rows. migrateSessions moves each
// into the one session model — the session row into sessions, its events
// into messages, its run row into runs, and the turns its log shows into
// finished runs — in ONE transaction per session, so a daemon killed
// half-way resumes with the sessions it had not moved yet. Once the old
// tables are empty they are dropped.
func (s *Store) migrateSessions(ctx context.Context) error {
	var n, version int
	if err := s.write.DB.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'managed_sessions'),
		(SELECT COALESCE(MAX(version), 0) FROM schema_migrations)`).Scan(&n, &version); err != nil {
		return fmt.Errorf("sqlite: look for the old session tables: %w", err)
	}
	if n == 0 || version < 16 { // nothing to move, or no new tables to move it to (a test's schema)
		return nil
	}
	moved := 0
	for {
		var batch []string
		rows, err := s.write.DB.QueryContext(ctx, `SELECT id FROM managed_sessions ORDER BY id LIMIT 100`)
		if err != nil {
			return fmt.Errorf("sqlite: list sessions to migrate: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return fmt.Errorf("sqlite: list sessions to migrate: %w", err)
			}
			batch = append(batch, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("sqlite: list sessions to migrate: %w", err)
		}
		if len(batch) == 0 {
			break
		}
		for _, id := range batch {
			if err := s.inTx(ctx, func(tx *wtx) error { return s.moveSession(ctx, tx, id) }); err != nil {
				return fmt.Errorf("sqlite: migrate session %s to the one session model: %w", id, err)
			}
			moved++
		}
	}
	err := s.inTx(ctx, func(tx *wtx) error {
		for _, t := range []string{"run_rows", "session_events", "managed_sessions"} {
			if _, err := tx.Tx.ExecContext(ctx, `DROP TABLE `+t); err != nil {
				return fmt.Errorf("drop %s: %w", t, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: drop the old session tables: %w", err)
	}
	s.logger.Info("sessions migrated to the one session model", "sessions", moved)
	return nil
}

// moveSession moves one session within tx (see migrateSessions).
func (s *Store) moveSession(ctx context.Context, tx *wtx, id string) error {
	res, err := tx.Tx.ExecContext(ctx, `INSERT INTO sessions
		(id, tenant_id, kind, status, version, custom_state, runtime, agent_id, agent_version, environment_id,
		 doc, sandbox_id, usage, processed_seq, stop_reason, terminated_at, archived_at, created_at, updated_at)
		SELECT id, tenant_id, 'managed', 'active', version, '{}', '{}', agent_id, agent_version, environment_id,
		 doc, sandbox_id, usage, processed_seq, stop_reason, terminated_at, archived_at, created_at, updated_at
		FROM managed_sessions WHERE id = ? ON CONFLICT DO NOTHING`, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("a session %s already exists in the sessions table: %w", id, store.ErrConflict)
	}
	if _, err := tx.Tx.ExecContext(ctx, `INSERT INTO messages (session_id, seq, event_id, role, content, created_at)
		SELECT session_id, seq, id, type, data, created_at FROM session_events WHERE session_id = ?`, id); err != nil {
		return err
	}
	turns, err := pastTurns(ctx, tx.Tx, id)
	if err != nil {
		return err
	}
	var active int64
	for i, t := range turns {
		if _, err := tx.Tx.ExecContext(ctx, `INSERT INTO runs (id, session_id, seq, status, start_sequence, turn_seq,
			created_at, updated_at, completed_at) VALUES (?, ?, ?, 'completed', ?, ?, ?, ?, ?)`,
			ids.New("run"), id, i+1, t.turnSeq, t.turnSeq, t.start, t.end, t.end); err != nil {
			return err
		}
		active += max(0, t.end-t.start)
	}
	if _, err := tx.Tx.ExecContext(ctx, `INSERT INTO runs (id, session_id, seq, status, start_sequence, turn_seq,
		owner, lease_expires_at, recovering, recovery_attempts, last_progress_seq, created_at, updated_at)
		SELECT ?, session_id, ?, 'running', turn_seq, turn_seq, owner, lease_expires_at, recovering,
		 recovery_attempts, last_progress_seq, started_at, updated_at FROM run_rows WHERE session_id = ?`,
		ids.New("run"), len(turns)+1, id); err != nil {
		return err
	}
	if _, err := tx.Tx.ExecContext(ctx, `UPDATE sessions SET active_us = ? WHERE id = ?`, active, id); err != nil {
		return err
	}
	s.reach("session-migrate", id)
	// The cascade removes its session_events and run_rows.
	_, err = tx.Tx.ExecContext(ctx, `DELETE FROM managed_sessions WHERE id = ?`, id)
	return err
}

// pastTurn is a finished turn as the old log shows it: from its
// session.status_running to the session.status_idle after it.
type pastTurn struct {
	turnSeq    int64 // the last user event before the turn began
	start, end int64 // unix microseconds
}

// pastTurns reads a session's finished turns from its old event log.
func pastTurns(ctx context.Context, q *sql.Tx, id string) ([]pastTurn, error) {
	rows, err := q.QueryContext(ctx, `SELECT seq, type, created_at FROM session_events
		WHERE session_id = ? AND (type LIKE 'user.%' OR type IN ('session.status_running', 'session.status_idle'))
		ORDER BY seq`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		out      []pastTurn
		open     *pastTurn
		lastUser int64
	)
	for rows.Next() {
		var (
			seq, at int64
			typ     string
		)
		if err := rows.Scan(&seq, &typ, &at); err != nil {
			return nil, err
		}
		switch typ {
		case "session.status_running":
			if open == nil {
				open = &pastTurn{turnSeq: lastUser, start: at}
			}
		case "session.status_idle":
			if open != nil {
				open.end = at
				out = append(out, *open)
				open = nil
			}
		default:
			lastUser = seq
		}
	}
	return out, rows.Err()
}
