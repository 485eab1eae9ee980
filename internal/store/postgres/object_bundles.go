package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

const objectBundleCols = `tenant_id, class, blob_key, sha256, size, uploaded_at`

func scanObjectBundle(row pgx.Row) (*store.ObjectBundle, error) {
	var b store.ObjectBundle
	if err := row.Scan(&b.TenantID, &b.Class, &b.BlobKey, &b.SHA256, &b.Size, &b.UploadedAt); err != nil {
		return nil, err
	}
	b.UploadedAt = b.UploadedAt.UTC()
	return &b, nil
}

// PutObjectBundle records a class's bundle, replacing the one it had. The
// row is inserted from the class's own row, so a class that does not exist
// gets no bundle (ErrNotFound); one deleted concurrently fails the foreign
// key, which maps to ErrNotFound too.
func (s *Store) PutObjectBundle(ctx context.Context, b *store.ObjectBundle) (*store.ObjectBundle, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	at := b.UploadedAt.UTC().Truncate(time.Microsecond)
	if at.IsZero() {
		at = s.clock()
	}
	out, err := scanObjectBundle(s.pool.QueryRow(ctx, `INSERT INTO object_bundles (`+objectBundleCols+`)
		SELECT tenant_id, class, $3, $4, $5, $6 FROM object_classes WHERE tenant_id = $1 AND class = $2
		ON CONFLICT (tenant_id, class) DO UPDATE SET blob_key = excluded.blob_key, sha256 = excluded.sha256,
			size = excluded.size, uploaded_at = excluded.uploaded_at
		RETURNING `+objectBundleCols,
		b.TenantID, b.Class, b.BlobKey, b.SHA256, b.Size, at))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("put bundle of object class %q (the class must exist)", b.Class), err)
	}
	return out, nil
}

// GetObjectBundle returns a class's bundle row or ErrNotFound.
func (s *Store) GetObjectBundle(ctx context.Context, tenantID, class string) (*store.ObjectBundle, error) {
	b, err := scanObjectBundle(s.pool.QueryRow(ctx, `SELECT `+objectBundleCols+` FROM object_bundles
		WHERE tenant_id = $1 AND class = $2`, tenantID, class))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("bundle of object class %q", class), err)
	}
	return b, nil
}

// ListObjectBundles lists one tenant's bundle rows by class.
func (s *Store) ListObjectBundles(ctx context.Context, tenantID string) ([]*store.ObjectBundle, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+objectBundleCols+` FROM object_bundles
		WHERE tenant_id = $1 ORDER BY class`, tenantID)
	if err != nil {
		return nil, mapErr("list object bundles", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.ObjectBundle, error) { return scanObjectBundle(row) })
	if err != nil {
		return nil, mapErr("list object bundles", err)
	}
	if out == nil {
		out = []*store.ObjectBundle{}
	}
	return out, nil
}

// DeleteObjectBundle removes a class's bundle row; the class stays.
func (s *Store) DeleteObjectBundle(ctx context.Context, tenantID, class string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM object_bundles WHERE tenant_id = $1 AND class = $2`, tenantID, class)
	if err != nil {
		return mapErr(fmt.Sprintf("delete bundle of object class %q", class), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete bundle of object class %q: %w", class, store.ErrNotFound)
	}
	return nil
}
