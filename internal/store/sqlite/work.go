package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// The environment work queue (issue 16). Every transition is one write
// transaction on the single write connection, so a poll's reap-then-claim
// and a heartbeat's compare-then-extend never interleave with another
// writer.

const workCols = `id, tenant_id, environment_id, session_id, state, metadata, created_at, polled_at, polled_by,
	acked_at, started_at, heartbeat_at, lease_token, lease_expires_at, stop_requested_at, stopped_at`

func scanWork(r scanner) (*store.WorkItem, error) {
	var (
		w                                                       store.WorkItem
		meta                                                    string
		created                                                 int64
		polled, acked, started, beat, expires, stopReq, stopped sql.NullInt64
	)
	if err := r.Scan(&w.ID, &w.TenantID, &w.EnvironmentID, &w.SessionID, &w.State, &meta, &created, &polled,
		&w.PolledBy, &acked, &started, &beat, &w.LeaseToken, &expires, &stopReq, &stopped); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(meta), &w.Metadata); err != nil {
		return nil, fmt.Errorf("sqlite: decode metadata of work item %q: %w", w.ID, err)
	}
	if w.Metadata == nil {
		w.Metadata = map[string]string{}
	}
	w.CreatedAt = fromMicros(created)
	w.PolledAt, w.AckedAt, w.StartedAt, w.HeartbeatAt = timePtr(polled), timePtr(acked), timePtr(started), timePtr(beat)
	w.LeaseExpiresAt, w.StopRequestedAt, w.StoppedAt = timePtr(expires), timePtr(stopReq), timePtr(stopped)
	return &w, nil
}

func encodeWorkMetadata(m map[string]string) string {
	if m == nil {
		return "{}"
	}
	b, _ := json.Marshal(m) // a map[string]string always marshals
	return string(b)
}

// getWork reads one item, scoped to its tenant and environment. The row
// is found by its primary key alone and the scope checked here, so no
// planner can prefer an index on (tenant, environment, …) and walk it.
func getWork(ctx context.Context, q querier, tenantID, envID, id string) (*store.WorkItem, error) {
	w, err := scanWork(q.QueryRowContext(ctx, `SELECT `+workCols+` FROM work_items WHERE id = ?`, id))
	if err == nil && (w.TenantID != tenantID || w.EnvironmentID != envID) {
		err = sql.ErrNoRows // another tenant's or environment's item
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("work item %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get work item %q: %w", id, err)
	}
	return w, nil
}

// EnsureSessionWork implements store.WorkStore. The partial unique index
// on the live item of a session decides the race: the insert does nothing
// when the session has one, and the live row is read instead.
func (s *Store) EnsureSessionWork(ctx context.Context, w store.WorkItem) (*store.WorkItem, bool, error) {
	for _, f := range [][2]string{{"work item TenantID", w.TenantID}, {"work item EnvironmentID", w.EnvironmentID},
		{"work item SessionID", w.SessionID}} {
		if err := requireID(f[0], f[1]); err != nil {
			return nil, false, err
		}
	}
	if w.ID == "" {
		w.ID = ids.New("work")
	}
	if w.CreatedAt.IsZero() {
		w.CreatedAt = s.timestamp()
	}
	var (
		out     *store.WorkItem
		created bool
	)
	err := s.inTx(ctx, func(tx *wtx) error {
		row, err := scanWork(tx.QueryRowContext(ctx, `INSERT INTO work_items
			(id, tenant_id, environment_id, session_id, state, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (session_id) WHERE state <> 'stopped' DO NOTHING RETURNING `+workCols,
			w.ID, w.TenantID, w.EnvironmentID, w.SessionID, store.WorkQueued, encodeWorkMetadata(w.Metadata),
			micros(w.CreatedAt)))
		switch {
		case err == nil:
			out, created = row, true
			return nil
		case s.drv.isUnique(err):
			return fmt.Errorf("work item %q: %w", w.ID, store.ErrAlreadyExists)
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("sqlite: create work item of session %q: %w", w.SessionID, err)
		}
		out, err = scanWork(tx.QueryRowContext(ctx, `SELECT `+workCols+` FROM work_items
			WHERE session_id = ? AND state <> 'stopped'`, w.SessionID))
		if err != nil {
			return fmt.Errorf("sqlite: read live work item of session %q: %w", w.SessionID, err)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, created, nil
}

// ClaimWork implements store.WorkStore: reap the environment's lapsed
// leases, then hand out the oldest claimable queued item.
func (s *Store) ClaimWork(ctx context.Context, p store.ClaimWorkParams) (*store.WorkItem, error) {
	now := micros(p.Now)
	var out *store.WorkItem
	err := s.inTx(ctx, func(tx *wtx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE work_items SET state = 'stopped', stopped_at = ?, lease_expires_at = NULL
			WHERE tenant_id = ? AND environment_id = ? AND state = 'stopping' AND lease_expires_at <= ?`,
			now, p.TenantID, p.EnvironmentID, now); err != nil {
			return fmt.Errorf("sqlite: stop lapsed work items: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE work_items SET state = 'queued', lease_token = '',
			lease_expires_at = NULL, heartbeat_at = NULL, started_at = NULL, acked_at = NULL, polled_at = NULL, polled_by = ''
			WHERE tenant_id = ? AND environment_id = ? AND state IN ('starting', 'active') AND lease_expires_at <= ?`,
			p.TenantID, p.EnvironmentID, now); err != nil {
			return fmt.Errorf("sqlite: re-queue lapsed work items: %w", err)
		}
		// Nothing to hand out still commits the reaping.
		row, err := scanWork(tx.QueryRowContext(ctx, `UPDATE work_items SET polled_at = ?, polled_by = ?
			WHERE id = (SELECT id FROM work_items WHERE tenant_id = ? AND environment_id = ? AND state = 'queued'
				AND (polled_at IS NULL OR polled_at <= ?) ORDER BY created_at, id LIMIT 1)
			RETURNING `+workCols,
			now, p.WorkerID, p.TenantID, p.EnvironmentID, micros(p.Now.Add(-p.ReclaimOlderThan))))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			out = nil
		case err != nil:
			return fmt.Errorf("sqlite: claim work of environment %q: %w", p.EnvironmentID, err)
		default:
			out = row
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		return nil, fmt.Errorf("queued work of environment %q: %w", p.EnvironmentID, store.ErrNotFound)
	}
	return out, nil
}

// AckWork implements store.WorkStore.
func (s *Store) AckWork(ctx context.Context, tenantID, envID, id string, now time.Time, ttl time.Duration) (*store.WorkItem, error) {
	var out *store.WorkItem
	err := s.inTx(ctx, func(tx *wtx) error {
		cur, err := getWork(ctx, tx, tenantID, envID, id)
		if err != nil {
			return err
		}
		if cur.State != store.WorkQueued {
			return fmt.Errorf("work item %q is %s; only a queued item can be acked: %w", id, cur.State, store.ErrConflict)
		}
		out, err = scanWork(tx.QueryRowContext(ctx, `UPDATE work_items SET state = 'starting', acked_at = ?,
			lease_token = '', lease_expires_at = ? WHERE id = ? RETURNING `+workCols,
			micros(now), micros(now.Add(ttl)), id))
		if err != nil {
			return fmt.Errorf("sqlite: ack work item %q: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// HeartbeatWork implements store.WorkStore.
func (s *Store) HeartbeatWork(ctx context.Context, p store.HeartbeatWorkParams) (*store.WorkItem, error) {
	var out *store.WorkItem
	err := s.inTx(ctx, func(tx *wtx) error {
		cur, err := getWork(ctx, tx, p.TenantID, p.EnvironmentID, p.ID)
		if err != nil {
			return err
		}
		switch {
		case cur.State == store.WorkStopped:
			out = cur
			return nil
		case cur.State == store.WorkQueued || cur.LeaseToken != p.Expected:
			return fmt.Errorf("work item %q: %w", p.ID, &store.LeaseLostError{Current: cur})
		}
		out, err = scanWork(tx.QueryRowContext(ctx, `UPDATE work_items SET lease_token = ?, heartbeat_at = ?,
			lease_expires_at = ?, started_at = COALESCE(started_at, ?),
			state = CASE WHEN state = 'starting' THEN 'active' ELSE state END
			WHERE id = ? RETURNING `+workCols,
			store.NextLeaseToken(cur.LeaseToken, p.Now), micros(p.Now), micros(p.Now.Add(p.TTL)), micros(p.Now), p.ID))
		if err != nil {
			return fmt.Errorf("sqlite: heartbeat work item %q: %w", p.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// StopWork implements store.WorkStore.
func (s *Store) StopWork(ctx context.Context, tenantID, envID, id string, force bool, now time.Time) (*store.WorkItem, error) {
	var out *store.WorkItem
	err := s.inTx(ctx, func(tx *wtx) error {
		cur, err := getWork(ctx, tx, tenantID, envID, id)
		if err != nil {
			return err
		}
		if cur.State == store.WorkStopped {
			return fmt.Errorf("work item %q is stopped already: %w", id, store.ErrConflict)
		}
		q := `UPDATE work_items SET state = 'stopping', stop_requested_at = COALESCE(stop_requested_at, ?1)
			WHERE id = ?2 RETURNING ` + workCols
		if force || cur.State == store.WorkQueued {
			q = `UPDATE work_items SET state = 'stopped', stop_requested_at = COALESCE(stop_requested_at, ?1),
				stopped_at = ?1, lease_expires_at = NULL WHERE id = ?2 RETURNING ` + workCols
		}
		if out, err = scanWork(tx.QueryRowContext(ctx, q, micros(now), id)); err != nil {
			return fmt.Errorf("sqlite: stop work item %q: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// StopSessionWork implements store.WorkStore.
func (s *Store) StopSessionWork(ctx context.Context, sessionID string, now time.Time) error {
	if _, err := s.write.ExecContext(ctx, `UPDATE work_items SET state = 'stopped',
		stop_requested_at = COALESCE(stop_requested_at, ?1), stopped_at = ?1, lease_expires_at = NULL
		WHERE session_id = ?2 AND state <> 'stopped'`, micros(now), sessionID); err != nil {
		return fmt.Errorf("sqlite: stop work of session %q: %w", sessionID, err)
	}
	return nil
}

// GetWork implements store.WorkStore.
func (s *Store) GetWork(ctx context.Context, tenantID, envID, id string) (*store.WorkItem, error) {
	return getWork(ctx, s.read, tenantID, envID, id)
}

// ListWork implements store.WorkStore. An unknown cursor is ErrNotFound
// rather than an empty page, so a bad page token is not taken for the end.
func (s *Store) ListWork(ctx context.Context, tenantID, envID, after string, limit int) ([]*store.WorkItem, error) {
	if limit <= 0 {
		limit = 100
	}
	// After a cursor, the page is a range of work_items_list.
	q, args := ``, []any{tenantID, envID, limit}
	if after != "" {
		cur, err := getWork(ctx, s.read, tenantID, envID, after)
		if err != nil {
			return nil, fmt.Errorf("list work items after cursor: %w", err)
		}
		q, args = ` AND (created_at, id) < (?4, ?5)`, append(args, micros(cur.CreatedAt), cur.ID)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+workCols+` FROM work_items
		WHERE tenant_id = ?1 AND environment_id = ?2`+q+` ORDER BY created_at DESC, id DESC LIMIT ?3`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list work items: %w", err)
	}
	return collect(rows, "work items", scanWork)
}

// UpdateWorkMetadata implements store.WorkStore.
func (s *Store) UpdateWorkMetadata(ctx context.Context, tenantID, envID, id string, patch map[string]*string) (*store.WorkItem, error) {
	var out *store.WorkItem
	err := s.inTx(ctx, func(tx *wtx) error {
		cur, err := getWork(ctx, tx, tenantID, envID, id)
		if err != nil {
			return err
		}
		meta := encodeWorkMetadata(store.PatchWorkMetadata(cur.Metadata, patch))
		if out, err = scanWork(tx.QueryRowContext(ctx, `UPDATE work_items SET metadata = ? WHERE id = ? RETURNING `+workCols,
			meta, id)); err != nil {
			return fmt.Errorf("sqlite: update metadata of work item %q: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// WorkStats implements store.WorkStore.
func (s *Store) WorkStats(ctx context.Context, tenantID, envID string, now time.Time, reclaimAge time.Duration) (store.WorkStats, error) {
	var (
		st     store.WorkStats
		oldest sql.NullInt64
	)
	cutoff := micros(now.Add(-reclaimAge))
	if err := s.read.QueryRowContext(ctx, `SELECT
		COALESCE(SUM(CASE WHEN polled_at IS NULL OR polled_at <= ?1 THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN polled_at > ?1 THEN 1 ELSE 0 END), 0),
		MIN(created_at)
		FROM work_items WHERE tenant_id = ?2 AND environment_id = ?3 AND state = 'queued'`,
		cutoff, tenantID, envID).Scan(&st.Depth, &st.Pending, &oldest); err != nil {
		return store.WorkStats{}, fmt.Errorf("sqlite: work stats of environment %q: %w", envID, err)
	}
	st.OldestQueuedAt = timePtr(oldest)
	return st, nil
}
