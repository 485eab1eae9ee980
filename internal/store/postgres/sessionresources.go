package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

const sessionResourceCols = `id, tenant_id, session_id, kind, mount_path, doc, secret, key_id, version, created_at, updated_at`

func scanSessionResource(row pgx.Row) (*store.SessionResource, error) {
	var (
		x   store.SessionResource
		doc []byte
	)
	if err := row.Scan(&x.ID, &x.TenantID, &x.SessionID, &x.Kind, &x.MountPath, &doc, &x.Secret, &x.KeyID, &x.Version,
		&x.CreatedAt, &x.UpdatedAt); err != nil {
		return nil, err
	}
	x.Doc = rawOrNil(doc)
	x.CreatedAt, x.UpdatedAt = x.CreatedAt.UTC(), x.UpdatedAt.UTC()
	return &x, nil
}

// CreateSessionResources inserts rs in one transaction.
func (s *Store) CreateSessionResources(ctx context.Context, rs []*store.SessionResource) ([]*store.SessionResource, error) {
	var out []*store.SessionResource
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = s.createResourcesTx(ctx, tx, rs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// createResourcesTx inserts rs within tx. Each names a Managed Agents
// session that exists (no foreign key says so since 0016): its row is
// key-share locked until commit, so a concurrent delete of the session
// waits and then removes these too.
func (s *Store) createResourcesTx(ctx context.Context, tx pgx.Tx, rs []*store.SessionResource) ([]*store.SessionResource, error) {
	out := make([]*store.SessionResource, 0, len(rs))
	now := s.clock()
	for _, r := range rs {
		in := *r
		if in.ID == "" {
			in.ID = ids.New("sesrsc")
		}
		doc, err := objectArg("session resource "+in.ID+": Doc", in.Doc)
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
		if err := tx.QueryRow(ctx, `SELECT 1 FROM sessions WHERE id = $1 AND kind = 'managed' FOR KEY SHARE`,
			in.SessionID).Scan(&one); err != nil {
			return nil, mapErr("session "+in.SessionID, err)
		}
		row, err := scanSessionResource(tx.QueryRow(ctx, `INSERT INTO session_resources
			(`+sessionResourceCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, $9, $10) RETURNING `+sessionResourceCols,
			in.ID, in.TenantID, in.SessionID, in.Kind, in.MountPath, doc, in.Secret, in.KeyID, in.CreatedAt, in.UpdatedAt))
		switch {
		case isUniqueViolation(err):
			return nil, fmt.Errorf("session %s: mount path %q is taken by another resource: %w", in.SessionID, in.MountPath, store.ErrConflict)
		case err != nil:
			return nil, mapErr("create session resource "+in.ID, err)
		}
		out = append(out, row)
	}
	return out, nil
}

// GetSessionResource returns the resource or ErrNotFound.
func (s *Store) GetSessionResource(ctx context.Context, id string) (*store.SessionResource, error) {
	r, err := scanSessionResource(s.pool.QueryRow(ctx, `SELECT `+sessionResourceCols+` FROM session_resources WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr("session resource "+id, err)
	}
	return r, nil
}

// ListSessionResources lists a session's resources by id.
func (s *Store) ListSessionResources(ctx context.Context, sessionID, afterID string, limit int) ([]*store.SessionResource, error) {
	var lim any
	if limit > 0 {
		lim = limit
	}
	rows, err := s.pool.Query(ctx, `SELECT `+sessionResourceCols+` FROM session_resources
		WHERE session_id = $1 AND id > $2 ORDER BY id LIMIT $3`, sessionID, afterID, lim)
	if err != nil {
		return nil, mapErr("list session resources", err)
	}
	return collect(rows, "session resources", scanSessionResource)
}

// UpdateSessionResourceSecret replaces the sealed secret.
func (s *Store) UpdateSessionResourceSecret(ctx context.Context, id string, secret []byte, keyID string) (*store.SessionResource, error) {
	r, err := scanSessionResource(s.pool.QueryRow(ctx, `UPDATE session_resources SET secret = $2, key_id = $3, version = version + 1, updated_at = $4
		WHERE id = $1 RETURNING `+sessionResourceCols, id, secret, keyID, s.clock()))
	if err != nil {
		return nil, mapErr("update session resource "+id, err)
	}
	return r, nil
}

// RekeySessionResourceSecret replaces the sealed secret at expectedVersion.
func (s *Store) RekeySessionResourceSecret(ctx context.Context, id string, expectedVersion int64, secret []byte, keyID string) (*store.SessionResource, error) {
	if keyID == "" || len(secret) == 0 {
		return nil, fmt.Errorf("session resource %s: key id and secret are required: %w", id, store.ErrInvalid)
	}
	out, err := scanSessionResource(s.pool.QueryRow(ctx, `UPDATE session_resources SET secret = $3, key_id = $4,
		version = version + 1 WHERE id = $1 AND version = $2 RETURNING `+sessionResourceCols, id, expectedVersion, secret, keyID))
	if err == nil {
		return out, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, mapErr("rekey session resource "+id, err)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM session_resources WHERE id = $1`, id).Scan(&n); err != nil {
		return nil, mapErr("read session resource "+id, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("session resource %s: %w", id, store.ErrNotFound)
	}
	return nil, fmt.Errorf("session resource %s changed since version %d: %w", id, expectedVersion, store.ErrVersionMismatch)
}

// ListSessionResourcesNotUnderKey pages through the sealed tokens a
// rotation must re-encrypt.
func (s *Store) ListSessionResourcesNotUnderKey(ctx context.Context, keyID, afterID string, limit int) ([]*store.SessionResource, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := s.pool.Query(ctx, `SELECT `+sessionResourceCols+` FROM session_resources
		WHERE secret IS NOT NULL AND key_id <> '' AND key_id <> $1 AND id > $2 ORDER BY id LIMIT $3`, keyID, afterID, lim)
	if err != nil {
		return nil, mapErr("list session resources to rekey", err)
	}
	return collect(rows, "session resources", scanSessionResource)
}

// DeleteSessionResource deletes the resource or says ErrNotFound.
func (s *Store) DeleteSessionResource(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM session_resources WHERE id = $1`, id)
	if err != nil {
		return mapErr("delete session resource "+id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("session resource %s: %w", id, store.ErrNotFound)
	}
	return nil
}
