package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

const objectCols = `tenant_id, class, object_id, status, sandbox_id, storage_keys, storage_bytes, version,
	last_call_at, hibernated_at, created_at, updated_at`

// objectWhere selects one object by its key: tenant, class, id arguments.
const objectWhere = ` WHERE tenant_id = ? AND class = ? AND object_id = ?`

func scanObject(r scanner) (*store.Object, error) {
	var (
		o                  store.Object
		status             string
		lastCall, hibernat sql.NullInt64
		created, updated   int64
	)
	if err := r.Scan(&o.TenantID, &o.Class, &o.ID, &status, &o.SandboxID, &o.StorageKeys, &o.StorageBytes,
		&o.Version, &lastCall, &hibernat, &created, &updated); err != nil {
		return nil, err
	}
	o.Status = store.ObjectStatus(status)
	o.LastCallAt, o.HibernatedAt = timePtr(lastCall), timePtr(hibernat)
	o.CreatedAt, o.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &o, nil
}

func keyArgs(k store.ObjectKey) []any { return []any{k.TenantID, k.Class, k.ID} }

func keyName(k store.ObjectKey) string { return k.Class + "/" + k.ID }

// requireObjectKey checks class and id; ” is a valid tenant (the internal
// owner).
func requireObjectKey(k store.ObjectKey) error {
	if k.Class == "" || k.ID == "" {
		return fmt.Errorf("object %q: class and id are required: %w", keyName(k), store.ErrInvalid)
	}
	return nil
}

// CreateObject implements store.ObjectStore: an Active object at version 1
// with empty storage. Zero CreatedAt becomes now; zero UpdatedAt becomes
// CreatedAt. ON CONFLICT DO NOTHING settles concurrent creators.
func (s *Store) CreateObject(ctx context.Context, o *store.Object) (*store.Object, error) {
	if o == nil {
		return nil, fmt.Errorf("object is required: %w", store.ErrInvalid)
	}
	if err := requireObjectKey(o.ObjectKey); err != nil {
		return nil, err
	}
	created, updated := o.CreatedAt, o.UpdatedAt
	if created.IsZero() {
		created = s.timestamp()
	}
	if updated.IsZero() {
		updated = created
	}
	out, err := scanObject(s.write.QueryRowContext(ctx, `INSERT INTO objects (`+objectCols+`)
		VALUES (?, ?, ?, ?, ?, 0, 0, 1, ?, NULL, ?, ?) ON CONFLICT DO NOTHING RETURNING `+objectCols,
		o.TenantID, o.Class, o.ID, store.ObjectActive, o.SandboxID, nullMicros(o.LastCallAt),
		micros(created), micros(updated)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("object %q: %w", keyName(o.ObjectKey), store.ErrAlreadyExists)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: create object %q: %w", keyName(o.ObjectKey), err)
	}
	return out, nil
}

// GetObject implements store.ObjectStore.
func (s *Store) GetObject(ctx context.Context, key store.ObjectKey) (*store.Object, error) {
	return getObject(ctx, s.read, key)
}

func getObject(ctx context.Context, q querier, key store.ObjectKey) (*store.Object, error) {
	o, err := scanObject(q.QueryRowContext(ctx, `SELECT `+objectCols+` FROM objects`+objectWhere, keyArgs(key)...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("object %q: %w", keyName(key), store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get object %q: %w", keyName(key), err)
	}
	return o, nil
}

// parseObjectCursor splits a ListObjectsParams.AfterID "class/id" at its
// first slash (class names have none; ids may).
func parseObjectCursor(after string) (class, id string, err error) {
	class, id, ok := strings.Cut(after, "/")
	if !ok {
		return "", "", fmt.Errorf("object cursor %q: want class/id: %w", after, store.ErrInvalid)
	}
	return class, id, nil
}

// ListObjects implements store.ObjectStore in (class, id) order, then tenant
// (which only matters when every tenant is listed). The cursor is a
// position, it need not name an object.
func (s *Store) ListObjects(ctx context.Context, p store.ListObjectsParams) ([]*store.Object, error) {
	var afterClass, afterID string
	hasCursor := p.AfterID != ""
	if hasCursor {
		var err error
		if afterClass, afterID, err = parseObjectCursor(p.AfterID); err != nil {
			return nil, err
		}
	}
	limit := -1 // SQLite: no limit
	if p.Limit > 0 {
		limit = p.Limit
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+objectCols+` FROM objects
		WHERE (? = '' OR tenant_id = ?) AND (? = '' OR class = ?) AND (? = '' OR status = ?)
		  AND (NOT ? OR (class, object_id) > (?, ?))
		ORDER BY class, object_id, tenant_id LIMIT ?`,
		p.TenantID, p.TenantID, p.Class, p.Class, string(p.Status), string(p.Status),
		hasCursor, afterClass, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list objects: %w", err)
	}
	defer rows.Close()
	out := []*store.Object{}
	for rows.Next() {
		o, err := scanObject(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: scan object: %w", err)
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// SetObjectActive implements store.ObjectStore: Active with sandboxID,
// Version+1, HibernatedAt cleared (it is set only while hibernating). Waking
// an already Active object just records the new sandbox.
func (s *Store) SetObjectActive(ctx context.Context, key store.ObjectKey, sandboxID string) (*store.Object, error) {
	args := append([]any{store.ObjectActive, sandboxID, micros(s.timestamp())}, keyArgs(key)...)
	var o *store.Object
	set := func(q querier) error {
		var err error
		o, err = scanObject(q.QueryRowContext(ctx, `UPDATE objects SET status = ?, sandbox_id = ?,
			hibernated_at = NULL, version = version + 1, updated_at = ?`+objectWhere+` RETURNING `+objectCols, args...))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("object %q: %w", keyName(key), store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: set object %q active: %w", keyName(key), err)
		}
		return nil
	}
	var err error
	if store.FencesFrom(ctx) == nil {
		err = set(s.write)
	} else {
		err = s.inTx(ctx, func(tx *wtx) error {
			if err := checkFences(ctx, tx, key); err != nil {
				return err
			}
			return set(tx)
		})
	}
	if err != nil {
		return nil, err
	}
	return o, nil
}

// TouchObject implements store.ObjectStore: LastCallAt only, so a touch
// never changes Version or UpdatedAt.
func (s *Store) TouchObject(ctx context.Context, key store.ObjectKey, at time.Time) error {
	res, err := s.write.ExecContext(ctx, `UPDATE objects SET last_call_at = ?`+objectWhere,
		append([]any{micros(at)}, keyArgs(key)...)...)
	if err != nil {
		return fmt.Errorf("sqlite: touch object %q: %w", keyName(key), err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("object %q: %w", keyName(key), store.ErrNotFound)
	}
	return nil
}

// DeleteObject implements store.ObjectStore; the foreign keys cascade to the
// object's storage and alarms in the same statement.
func (s *Store) DeleteObject(ctx context.Context, key store.ObjectKey) error {
	res, err := s.write.ExecContext(ctx, `DELETE FROM objects`+objectWhere, keyArgs(key)...)
	if err != nil {
		return fmt.Errorf("sqlite: delete object %q: %w", keyName(key), err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("object %q: %w", keyName(key), store.ErrNotFound)
	}
	return nil
}
