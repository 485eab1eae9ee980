package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// AppendAudit stores r. It fills r.ID (time-ordered, so id order is append
// order) and r.At when they are zero, so the caller learns what was stored.
func (s *Store) AppendAudit(ctx context.Context, r *store.AuditRecord) error {
	return s.appendAuditTx(ctx, s.pool, r)
}

// execer is what the pool and a transaction share for a single write.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// appendAuditTx inserts r with q (the pool, or a transaction that writes
// more with it).
func (s *Store) appendAuditTx(ctx context.Context, q execer, r *store.AuditRecord) error {
	if r == nil || r.Kind == "" {
		return fmt.Errorf("audit record kind is required: %w", store.ErrInvalid)
	}
	data, err := jsonArg("audit data", r.Data)
	if err != nil {
		return err
	}
	if r.ID == "" {
		r.ID = ids.New("aud")
	}
	if r.At.IsZero() {
		r.At = s.clock()
	}
	_, err = q.Exec(ctx, `INSERT INTO audit (id, tenant_id, kind, subject, data, at) VALUES ($1, $2, $3, $4, $5, $6)`,
		r.ID, r.TenantID, r.Kind, r.Subject, data, r.At)
	if isUniqueViolation(err) {
		return fmt.Errorf("append audit %s: %w", r.ID, store.ErrAlreadyExists)
	}
	return mapErr(fmt.Sprintf("append audit %s", r.Kind), err)
}

// ListAudit pages through one tenant's records in id order after AfterID;
// Limit <= 0 is no limit.
func (s *Store) ListAudit(ctx context.Context, p store.ListAuditParams) ([]*store.AuditRecord, error) {
	var limit *int
	if p.Limit > 0 {
		limit = &p.Limit
	}
	rows, err := s.pool.Query(ctx, `SELECT id, tenant_id, kind, subject, data, at FROM audit
		WHERE tenant_id = $1 AND ($2::text = '' OR kind = $2) AND ($5::text = '' OR subject = $5) AND id > $3 ORDER BY id LIMIT $4`,
		p.TenantID, p.Kind, p.AfterID, limit, p.Subject)
	if err != nil {
		return nil, mapErr("list audit", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.AuditRecord, error) {
		var (
			r    store.AuditRecord
			data []byte
		)
		if err := row.Scan(&r.ID, &r.TenantID, &r.Kind, &r.Subject, &data, &r.At); err != nil {
			return nil, err
		}
		r.Data, r.At = rawOrNil(data), r.At.UTC()
		return &r, nil
	})
	if err != nil {
		return nil, mapErr("list audit", err)
	}
	if out == nil {
		out = []*store.AuditRecord{}
	}
	return out, nil
}
