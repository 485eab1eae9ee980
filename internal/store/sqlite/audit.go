package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// AppendAudit implements store.ObjectStore. It fills r.ID (time-ordered, so
// id order is append order) and r.At when they are zero, so the caller
// learns what was stored.
func (s *Store) AppendAudit(ctx context.Context, r *store.AuditRecord) error {
	return s.appendAuditTx(ctx, s.write, r)
}

// appendAuditTx inserts r with q (the write pool, or a transaction that
// writes more with it).
func (s *Store) appendAuditTx(ctx context.Context, q querier, r *store.AuditRecord) error {
	if r == nil || r.Kind == "" {
		return fmt.Errorf("audit record kind is required: %w", store.ErrInvalid)
	}
	data, err := jsonValue("audit data", r.Data)
	if err != nil {
		return err
	}
	if r.ID == "" {
		r.ID = ids.New("aud")
	}
	if r.At.IsZero() {
		r.At = s.timestamp()
	}
	_, err = q.ExecContext(ctx, `INSERT INTO audit (id, tenant_id, kind, subject, data, at)
		VALUES (?, ?, ?, ?, ?, ?)`, r.ID, r.TenantID, r.Kind, r.Subject, data, micros(r.At))
	if s.drv.isUnique(err) {
		return fmt.Errorf("audit record %q: %w", r.ID, store.ErrAlreadyExists)
	}
	if err != nil {
		return fmt.Errorf("sqlite: append audit %q: %w", r.Kind, err)
	}
	return nil
}

// ListAudit implements store.ObjectStore: one tenant's records in id order
// after AfterID; Limit <= 0 is no limit.
func (s *Store) ListAudit(ctx context.Context, p store.ListAuditParams) ([]*store.AuditRecord, error) {
	limit := -1
	if p.Limit > 0 {
		limit = p.Limit
	}
	rows, err := s.read.QueryContext(ctx, `SELECT id, tenant_id, kind, subject, data, at FROM audit
		WHERE tenant_id = ? AND (? = '' OR kind = ?) AND (? = '' OR subject = ?) AND id > ? ORDER BY id LIMIT ?`,
		p.TenantID, p.Kind, p.Kind, p.Subject, p.Subject, p.AfterID, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list audit: %w", err)
	}
	defer rows.Close()
	out := []*store.AuditRecord{}
	for rows.Next() {
		var (
			r    store.AuditRecord
			data sql.NullString
			at   int64
		)
		if err := rows.Scan(&r.ID, &r.TenantID, &r.Kind, &r.Subject, &data, &at); err != nil {
			return nil, fmt.Errorf("sqlite: scan audit: %w", err)
		}
		r.Data, r.At = rawOrNil(data), fromMicros(at)
		out = append(out, &r)
	}
	return out, rows.Err()
}
