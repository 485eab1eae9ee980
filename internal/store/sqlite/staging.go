package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Staged changes are a side channel: staging and discarding do not bump the
// session version; promoting does (it changes messages and state).

// StageChanges implements store.StagingStore. Replacing a step's change
// keeps its place in staging order.
func (s *Store) StageChanges(ctx context.Context, c store.StagedChange) error {
	if err := requireID("step id", c.StepID); err != nil {
		return err
	}
	if err := validateMessages(c.Messages); err != nil {
		return err
	}
	writes, err := jsonObject("state writes", c.StateWrites, "")
	if err != nil {
		return err
	}
	msgs, err := json.Marshal(c.Messages)
	if err != nil {
		return fmt.Errorf("sqlite: encode staged messages: %w", err)
	}
	return s.inTx(ctx, func(tx *wtx) error {
		if err := requireSession(ctx, tx, c.SessionID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO staging (session_id, step_id, messages, state_writes, created_at)
			VALUES (?, ?, ?, NULLIF(?, ''), ?)
			ON CONFLICT (session_id, step_id) DO UPDATE SET messages = excluded.messages,
			state_writes = excluded.state_writes, created_at = excluded.created_at`,
			c.SessionID, c.StepID, string(msgs), writes, micros(s.timestamp()))
		if err != nil {
			return fmt.Errorf("sqlite: stage changes of %q step %q: %w", c.SessionID, c.StepID, err)
		}
		return nil
	})
}

// GetStagedChanges implements store.StagingStore.
func (s *Store) GetStagedChanges(ctx context.Context, sessionID string) ([]store.StagedChange, error) {
	out, err := stagedChanges(ctx, s.read, sessionID)
	if err != nil || len(out) > 0 {
		return out, err
	}
	return nil, requireSession(ctx, s.read, sessionID)
}

func stagedChanges(ctx context.Context, q querier, sessionID string) ([]store.StagedChange, error) {
	rows, err := q.QueryContext(ctx, `SELECT step_id, messages, state_writes, created_at FROM staging
		WHERE session_id = ? ORDER BY ord`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get staged changes of %q: %w", sessionID, err)
	}
	defer rows.Close()
	var out []store.StagedChange
	for rows.Next() {
		c := store.StagedChange{SessionID: sessionID}
		var msgs string
		var writes sql.NullString
		var created int64
		if err := rows.Scan(&c.StepID, &msgs, &writes, &created); err != nil {
			return nil, fmt.Errorf("sqlite: scan staged change: %w", err)
		}
		if err := json.Unmarshal([]byte(msgs), &c.Messages); err != nil {
			return nil, fmt.Errorf("sqlite: decode staged messages: %w", err)
		}
		c.StateWrites, c.CreatedAt = rawOrNil(writes), fromMicros(created)
		out = append(out, c)
	}
	return out, rows.Err()
}

// PromoteStaging implements store.StagingStore.
func (s *Store) PromoteStaging(ctx context.Context, sessionID string) (int, error) {
	var n int
	err := s.inTx(ctx, func(tx *wtx) error {
		if err := requireSession(ctx, tx, sessionID); err != nil {
			return err
		}
		var custom string
		if err := tx.QueryRowContext(ctx, `SELECT custom_state FROM sessions WHERE id = ?`, sessionID).
			Scan(&custom); err != nil {
			return fmt.Errorf("sqlite: read custom state of %q: %w", sessionID, err)
		}
		merged, count, err := s.promoteTx(ctx, tx, sessionID, custom)
		if err != nil || count == 0 {
			return err
		}
		n = count
		_, err = tx.ExecContext(ctx, `UPDATE sessions SET custom_state = ?, version = version + 1, updated_at = ?
			WHERE id = ?`, merged, micros(s.timestamp()), sessionID)
		if err != nil {
			return fmt.Errorf("sqlite: write promoted state of %q: %w", sessionID, err)
		}
		return nil
	})
	return n, err
}

// promoteTx appends every staged change's messages in staging order, merges
// its state writes into custom, and deletes the staged rows. It returns the
// merged custom state and how many changes it promoted; the caller writes the
// state and bumps the version.
func (s *Store) promoteTx(ctx context.Context, tx *wtx, sessionID, custom string) (string, int, error) {
	changes, err := stagedChanges(ctx, tx, sessionID)
	if err != nil || len(changes) == 0 {
		return custom, 0, err
	}
	for _, c := range changes {
		if _, err := s.appendTx(ctx, tx, sessionID, c.Messages); err != nil {
			return "", 0, err
		}
		if len(c.StateWrites) > 0 {
			if custom, err = mergeTopLevel(custom, c.StateWrites); err != nil {
				return "", 0, err
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM staging WHERE session_id = ?`, sessionID); err != nil {
		return "", 0, fmt.Errorf("sqlite: clear staging of %q: %w", sessionID, err)
	}
	return custom, len(changes), nil
}

// DiscardStaging implements store.StagingStore.
func (s *Store) DiscardStaging(ctx context.Context, sessionID string) error {
	return s.inTx(ctx, func(tx *wtx) error {
		if err := requireSession(ctx, tx, sessionID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM staging WHERE session_id = ?`, sessionID); err != nil {
			return fmt.Errorf("sqlite: discard staging of %q: %w", sessionID, err)
		}
		return nil
	})
}

// HasStagedChanges implements store.StagingStore.
func (s *Store) HasStagedChanges(ctx context.Context, sessionID string) (bool, error) {
	var has bool
	if err := s.read.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM staging WHERE session_id = ?)`,
		sessionID).Scan(&has); err != nil {
		return false, fmt.Errorf("sqlite: has staged changes of %q: %w", sessionID, err)
	}
	if !has {
		return false, requireSession(ctx, s.read, sessionID)
	}
	return true, nil
}

// CleanupOrphanedStaging implements store.StagingStore.
func (s *Store) CleanupOrphanedStaging(ctx context.Context, olderThan time.Time) (int, error) {
	res, err := s.write.ExecContext(ctx, `DELETE FROM staging WHERE created_at < ?
		OR session_id NOT IN (SELECT id FROM sessions)`, micros(olderThan))
	if err != nil {
		return 0, fmt.Errorf("sqlite: clean up staging: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
