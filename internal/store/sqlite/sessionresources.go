package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

const sessionResourceCols = `id, tenant_id, session_id, kind, mount_path, doc, secret, key_id, version, created_at, updated_at`

func scanSessionResource(r scanner) (*store.SessionResource, error) {
	var (
		x                store.SessionResource
		doc              string
		created, updated int64
	)
	if err := r.Scan(&x.ID, &x.TenantID, &x.SessionID, &x.Kind, &x.MountPath, &doc, &x.Secret, &x.KeyID, &x.Version,
		&created, &updated); err != nil {
		return nil, err
	}
	x.Doc = []byte(doc)
	x.CreatedAt, x.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &x, nil
}

// CreateSessionResources implements store.SessionResourceStore.
func (s *Store) CreateSessionResources(ctx context.Context, rs []*store.SessionResource) ([]*store.SessionResource, error) {
	var out []*store.SessionResource
	err := s.inTx(ctx, func(tx *wtx) error {
		var err error
		out, err = s.createResourcesTx(ctx, tx, rs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// createResourcesTx inserts rs within tx; each names a Managed Agents
// session that exists (no foreign key says so since 0016).
func (s *Store) createResourcesTx(ctx context.Context, tx *wtx, rs []*store.SessionResource) ([]*store.SessionResource, error) {
	out := make([]*store.SessionResource, 0, len(rs))
	now := s.timestamp()
	for _, r := range rs {
		in := *r
		if in.ID == "" {
			in.ID = ids.New("sesrsc")
		}
		doc, err := jsonObject("session resource "+in.ID+": Doc", in.Doc, "{}")
		if err != nil {
			return nil, err
		}
		if in.CreatedAt.IsZero() {
			in.CreatedAt = now
		}
		if in.UpdatedAt.IsZero() {
			in.UpdatedAt = in.CreatedAt
		}
		var one int
		err = tx.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ? AND kind = 'managed'`, in.SessionID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("session %s: %w", in.SessionID, store.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("sqlite: look up session %q: %w", in.SessionID, err)
		}
		row, err := scanSessionResource(tx.QueryRowContext(ctx, `INSERT INTO session_resources
			(`+sessionResourceCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?) RETURNING `+sessionResourceCols,
			in.ID, in.TenantID, in.SessionID, in.Kind, in.MountPath, doc, in.Secret, in.KeyID,
			micros(in.CreatedAt), micros(in.UpdatedAt)))
		if s.drv.isUnique(err) {
			return nil, fmt.Errorf("session %s: mount path %q is taken by another resource: %w", in.SessionID, in.MountPath, store.ErrConflict)
		}
		if err != nil {
			return nil, fmt.Errorf("sqlite: create session resource %q: %w", in.ID, err)
		}
		out = append(out, row)
	}
	return out, nil
}

// GetSessionResource implements store.SessionResourceStore.
func (s *Store) GetSessionResource(ctx context.Context, id string) (*store.SessionResource, error) {
	r, err := scanSessionResource(s.read.QueryRowContext(ctx, `SELECT `+sessionResourceCols+` FROM session_resources WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session resource %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get session resource %q: %w", id, err)
	}
	return r, nil
}

// ListSessionResources implements store.SessionResourceStore.
func (s *Store) ListSessionResources(ctx context.Context, sessionID, afterID string, limit int) ([]*store.SessionResource, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+sessionResourceCols+` FROM session_resources
		WHERE session_id = ? AND id > ? ORDER BY id LIMIT ?`, sessionID, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list session resources: %w", err)
	}
	return collect(rows, "session resources", scanSessionResource)
}

// UpdateSessionResourceSecret implements store.SessionResourceStore.
func (s *Store) UpdateSessionResourceSecret(ctx context.Context, id string, secret []byte, keyID string) (*store.SessionResource, error) {
	r, err := scanSessionResource(s.write.QueryRowContext(ctx, `UPDATE session_resources SET secret = ?, key_id = ?, version = version + 1, updated_at = ?
		WHERE id = ? RETURNING `+sessionResourceCols, secret, keyID, micros(s.timestamp()), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session resource %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: update session resource %q: %w", id, err)
	}
	return r, nil
}

// RekeySessionResourceSecret implements store.SessionResourceStore.
func (s *Store) RekeySessionResourceSecret(ctx context.Context, id string, expectedVersion int64, secret []byte, keyID string) (*store.SessionResource, error) {
	if keyID == "" || len(secret) == 0 {
		return nil, fmt.Errorf("session resource %q: key id and secret are required: %w", id, store.ErrInvalid)
	}
	var out *store.SessionResource
	err := s.inTx(ctx, func(tx *wtx) error {
		row, err := scanSessionResource(tx.QueryRowContext(ctx, `UPDATE session_resources SET secret = ?, key_id = ?,
			version = version + 1 WHERE id = ? AND version = ? RETURNING `+sessionResourceCols, secret, keyID, id, expectedVersion))
		if err == nil {
			out = row
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: rekey session resource %q: %w", id, err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM session_resources WHERE id = ?`, id).Scan(&n); err != nil {
			return fmt.Errorf("sqlite: read session resource %q: %w", id, err)
		}
		if n == 0 {
			return fmt.Errorf("session resource %q: %w", id, store.ErrNotFound)
		}
		return fmt.Errorf("session resource %q changed since version %d: %w", id, expectedVersion, store.ErrVersionMismatch)
	})
	return out, err
}

// ListSessionResourcesNotUnderKey implements store.SessionResourceStore.
func (s *Store) ListSessionResourcesNotUnderKey(ctx context.Context, keyID, afterID string, limit int) ([]*store.SessionResource, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+sessionResourceCols+` FROM session_resources
		WHERE secret IS NOT NULL AND key_id <> '' AND key_id <> ? AND id > ? ORDER BY id LIMIT ?`, keyID, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list session resources to rekey: %w", err)
	}
	return collect(rows, "session resources", scanSessionResource)
}

// DeleteSessionResource implements store.SessionResourceStore.
func (s *Store) DeleteSessionResource(ctx context.Context, id string) error {
	res, err := s.write.ExecContext(ctx, `DELETE FROM session_resources WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("sqlite: delete session resource %q: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("session resource %q: %w", id, store.ErrNotFound)
	}
	return nil
}
