package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

const objectBundleCols = `tenant_id, class, blob_key, sha256, size, uploaded_at`

func scanObjectBundle(r scanner) (*store.ObjectBundle, error) {
	var (
		b        store.ObjectBundle
		uploaded int64
	)
	if err := r.Scan(&b.TenantID, &b.Class, &b.BlobKey, &b.SHA256, &b.Size, &uploaded); err != nil {
		return nil, err
	}
	b.UploadedAt = fromMicros(uploaded)
	return &b, nil
}

// PutObjectBundle implements store.ObjectStore. The row is inserted from
// the class's own row, so a class that does not exist (or was deleted
// meanwhile) gets no bundle.
func (s *Store) PutObjectBundle(ctx context.Context, b *store.ObjectBundle) (*store.ObjectBundle, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	at := b.UploadedAt
	if at.IsZero() {
		at = s.timestamp()
	}
	out, err := scanObjectBundle(s.write.QueryRowContext(ctx, `INSERT INTO object_bundles (`+objectBundleCols+`)
		SELECT tenant_id, class, ?, ?, ?, ? FROM object_classes WHERE tenant_id = ? AND class = ?
		ON CONFLICT (tenant_id, class) DO UPDATE SET blob_key = excluded.blob_key, sha256 = excluded.sha256,
			size = excluded.size, uploaded_at = excluded.uploaded_at
		RETURNING `+objectBundleCols,
		b.BlobKey, b.SHA256, b.Size, micros(at), b.TenantID, b.Class))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("bundle of object class %q: the class does not exist: %w", b.Class, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: put bundle of object class %q: %w", b.Class, err)
	}
	return out, nil
}

// GetObjectBundle implements store.ObjectStore.
func (s *Store) GetObjectBundle(ctx context.Context, tenantID, class string) (*store.ObjectBundle, error) {
	b, err := scanObjectBundle(s.read.QueryRowContext(ctx, `SELECT `+objectBundleCols+` FROM object_bundles
		WHERE tenant_id = ? AND class = ?`, tenantID, class))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("bundle of object class %q: %w", class, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get bundle of object class %q: %w", class, err)
	}
	return b, nil
}

// ListObjectBundles implements store.ObjectStore.
func (s *Store) ListObjectBundles(ctx context.Context, tenantID string) ([]*store.ObjectBundle, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+objectBundleCols+` FROM object_bundles
		WHERE tenant_id = ? ORDER BY class`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list object bundles: %w", err)
	}
	defer rows.Close()
	out := []*store.ObjectBundle{}
	for rows.Next() {
		b, err := scanObjectBundle(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: scan object bundle: %w", err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// DeleteObjectBundle implements store.ObjectStore.
func (s *Store) DeleteObjectBundle(ctx context.Context, tenantID, class string) error {
	res, err := s.write.ExecContext(ctx, `DELETE FROM object_bundles WHERE tenant_id = ? AND class = ?`, tenantID, class)
	if err != nil {
		return fmt.Errorf("sqlite: delete bundle of object class %q: %w", class, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("bundle of object class %q: %w", class, store.ErrNotFound)
	}
	return nil
}
