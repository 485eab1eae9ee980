package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// pendingSessionsSQL finds queued input with no turn to take it.
const pendingSessionsSQL = `SELECT s.id FROM sessions s
WHERE s.kind = 'managed' AND s.branch_of = '' AND s.terminated_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.session_id = s.id AND r.status = 'running' AND r.owner <> '')
  AND EXISTS (SELECT 1 FROM messages e
              WHERE e.session_id = s.id AND e.seq > s.processed_seq AND e.role LIKE 'user.%')
ORDER BY s.id COLLATE "C"`

// ListPendingSessions implements store.ManagedStore.
func (s *Store) ListPendingSessions(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, pendingSessionsSQL)
	if err != nil {
		return nil, mapErr("list pending sessions", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, mapErr("list pending sessions", err)
	}
	if ids == nil {
		ids = []string{}
	}
	return ids, nil
}
