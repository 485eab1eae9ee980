package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

const objectCols = `tenant_id, class, object_id, status, sandbox_id, storage_keys, storage_bytes, version,
	last_call_at, hibernated_at, created_at, updated_at`

// objectWhere selects one object by its key: tenant, class and id are $1-$3.
const objectWhere = ` WHERE tenant_id = $1 AND class = $2 AND object_id = $3`

func scanObject(row pgx.Row) (*store.Object, error) {
	var (
		o      store.Object
		status string
	)
	if err := row.Scan(&o.TenantID, &o.Class, &o.ID, &status, &o.SandboxID, &o.StorageKeys, &o.StorageBytes,
		&o.Version, &o.LastCallAt, &o.HibernatedAt, &o.CreatedAt, &o.UpdatedAt); err != nil {
		return nil, err
	}
	o.Status = store.ObjectStatus(status)
	o.LastCallAt, o.HibernatedAt = utcPtr(o.LastCallAt), utcPtr(o.HibernatedAt)
	o.CreatedAt, o.UpdatedAt = o.CreatedAt.UTC(), o.UpdatedAt.UTC()
	return &o, nil
}

// keyArgs are $1-$3 of objectWhere, followed by more.
func keyArgs(k store.ObjectKey, more ...any) []any {
	return append([]any{k.TenantID, k.Class, k.ID}, more...)
}

func keyName(k store.ObjectKey) string { return k.Class + "/" + k.ID }

// requireObjectKey checks class and id; ” is a valid tenant (the internal
// owner).
func requireObjectKey(k store.ObjectKey) error {
	if k.Class == "" || k.ID == "" {
		return fmt.Errorf("object %q: class and id are required: %w", keyName(k), store.ErrInvalid)
	}
	return nil
}

// CreateObject inserts an Active object at version 1 with empty storage.
// Zero CreatedAt becomes now; zero UpdatedAt becomes CreatedAt. The primary
// key settles concurrent creators.
func (s *Store) CreateObject(ctx context.Context, o *store.Object) (*store.Object, error) {
	if o == nil {
		return nil, fmt.Errorf("object is required: %w", store.ErrInvalid)
	}
	if err := requireObjectKey(o.ObjectKey); err != nil {
		return nil, err
	}
	created, updated := o.CreatedAt, o.UpdatedAt
	if created.IsZero() {
		created = s.clock()
	}
	if updated.IsZero() {
		updated = created
	}
	out, err := scanObject(s.pool.QueryRow(ctx, `INSERT INTO objects (`+objectCols+`)
		VALUES ($1, $2, $3, $4, $5, 0, 0, 1, $6, NULL, $7, $8) ON CONFLICT DO NOTHING RETURNING `+objectCols,
		keyArgs(o.ObjectKey, string(store.ObjectActive), o.SandboxID, o.LastCallAt, created, updated)...))
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("create object %q: %w", keyName(o.ObjectKey), store.ErrAlreadyExists)
		}
		return nil, mapErr(fmt.Sprintf("create object %q", keyName(o.ObjectKey)), err)
	}
	return out, nil
}

// GetObject returns the object or ErrNotFound.
func (s *Store) GetObject(ctx context.Context, key store.ObjectKey) (*store.Object, error) {
	return getObject(ctx, s.pool, key, false)
}

// getObject reads the object, locking its row when lock is set: every
// change to an object's storage first takes that lock, so storage totals
// are computed from committed rows only.
func getObject(ctx context.Context, q querier, key store.ObjectKey, lock bool) (*store.Object, error) {
	sql := `SELECT ` + objectCols + ` FROM objects` + objectWhere
	if lock {
		sql += ` FOR NO KEY UPDATE`
	}
	o, err := scanObject(q.QueryRow(ctx, sql, keyArgs(key)...))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("object %q", keyName(key)), err)
	}
	return o, nil
}

// ListObjects lists objects in (class, id) order, then tenant (which only
// matters when every tenant is listed). The cursor is a position; it need
// not name an object. Limit <= 0 is no limit.
func (s *Store) ListObjects(ctx context.Context, p store.ListObjectsParams) ([]*store.Object, error) {
	var afterClass, afterID string
	hasCursor := p.AfterID != ""
	if hasCursor {
		var ok bool
		// Class names have no slash; ids may.
		if afterClass, afterID, ok = strings.Cut(p.AfterID, "/"); !ok {
			return nil, fmt.Errorf("object cursor %q: want class/id: %w", p.AfterID, store.ErrInvalid)
		}
	}
	var limit *int
	if p.Limit > 0 {
		limit = &p.Limit
	}
	rows, err := s.pool.Query(ctx, `SELECT `+objectCols+` FROM objects
		WHERE ($1::text = '' OR tenant_id = $1) AND ($2::text = '' OR class = $2) AND ($3::text = '' OR status = $3)
		  AND (NOT $4::boolean OR (class, object_id) > ($5::text, $6::text))
		ORDER BY class, object_id, tenant_id LIMIT $7`,
		p.TenantID, p.Class, string(p.Status), hasCursor, afterClass, afterID, limit)
	if err != nil {
		return nil, mapErr("list objects", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Object, error) { return scanObject(row) })
	if err != nil {
		return nil, mapErr("list objects", err)
	}
	if out == nil {
		out = []*store.Object{}
	}
	return out, nil
}

// SetObjectActive marks the object Active with sandboxID, Version+1, and
// clears HibernatedAt (it is set only while hibernating). Waking an already
// Active object just records the new sandbox.
func (s *Store) SetObjectActive(ctx context.Context, key store.ObjectKey, sandboxID string) (*store.Object, error) {
	const q = `UPDATE objects SET status = $4, sandbox_id = $5,
		hibernated_at = NULL, version = version + 1, updated_at = $6` + objectWhere + ` RETURNING ` + objectCols
	args := keyArgs(key, string(store.ObjectActive), sandboxID, s.clock())
	op := fmt.Sprintf("set object %q active", keyName(key))
	if store.FencesFrom(ctx) == nil {
		o, err := scanObject(s.pool.QueryRow(ctx, q, args...))
		if err != nil {
			return nil, mapErr(op, err)
		}
		return o, nil
	}
	var out *store.Object
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := checkFences(ctx, tx, key); err != nil {
			return err
		}
		o, err := scanObject(tx.QueryRow(ctx, q, args...))
		out = o
		return err
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// TouchObject sets LastCallAt only: never Version or UpdatedAt.
func (s *Store) TouchObject(ctx context.Context, key store.ObjectKey, at time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE objects SET last_call_at = $4`+objectWhere, keyArgs(key, at)...)
	if err != nil {
		return mapErr(fmt.Sprintf("touch object %q", keyName(key)), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("touch object %q: %w", keyName(key), store.ErrNotFound)
	}
	return nil
}

// DeleteObject removes the object; the foreign keys cascade to its storage
// and alarms in the same statement.
func (s *Store) DeleteObject(ctx context.Context, key store.ObjectKey) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM objects`+objectWhere, keyArgs(key)...)
	if err != nil {
		return mapErr(fmt.Sprintf("delete object %q", keyName(key)), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete object %q: %w", keyName(key), store.ErrNotFound)
	}
	return nil
}
