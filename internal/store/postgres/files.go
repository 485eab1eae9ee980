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

const fileCols = `id, tenant_id, filename, mime_type, size_bytes, sha256, blob_key, downloadable, scope_session_id, expires_at, created_at`

func scanFile(row pgx.Row) (*store.File, error) {
	var f store.File
	if err := row.Scan(&f.ID, &f.TenantID, &f.Filename, &f.MimeType, &f.SizeBytes, &f.SHA256, &f.BlobKey,
		&f.Downloadable, &f.ScopeSessionID, &f.ExpiresAt, &f.CreatedAt); err != nil {
		return nil, err
	}
	f.ExpiresAt = utcPtr(f.ExpiresAt)
	f.CreatedAt = f.CreatedAt.UTC()
	return &f, nil
}

// CreateFile inserts a file row. Zero CreatedAt becomes now.
func (s *Store) CreateFile(ctx context.Context, f *store.File) (*store.File, error) {
	in := *f
	if in.ID == "" || in.BlobKey == "" {
		return nil, fmt.Errorf("postgres: create file: id and blob key are required")
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.clock()
	}
	out, err := scanFile(s.pool.QueryRow(ctx, `INSERT INTO files (`+fileCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING `+fileCols,
		in.ID, in.TenantID, in.Filename, in.MimeType, in.SizeBytes, in.SHA256, in.BlobKey,
		in.Downloadable, in.ScopeSessionID, in.ExpiresAt, in.CreatedAt))
	if err != nil {
		if isUniqueViolation(err) {
			return nil, fmt.Errorf("create file %s: %w", in.ID, store.ErrAlreadyExists)
		}
		return nil, mapErr("create file "+in.ID, err)
	}
	return out, nil
}

// GetFile returns the tenant's file or ErrNotFound.
func (s *Store) GetFile(ctx context.Context, tenantID, id string) (*store.File, error) {
	f, err := scanFile(s.pool.QueryRow(ctx, `SELECT `+fileCols+` FROM files WHERE id = $1 AND tenant_id = $2`, id, tenantID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("file %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("get file "+id, err)
	}
	return f, nil
}

// ListFiles pages through a tenant's files.
func (s *Store) ListFiles(ctx context.Context, p store.ListFilesParams) ([]*store.File, error) {
	q := strings.Builder{}
	q.WriteString(`SELECT ` + fileCols + ` FROM files WHERE tenant_id = $1`)
	args := []any{p.TenantID}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if p.ScopeSessionID != "" {
		q.WriteString(` AND scope_session_id = ` + arg(p.ScopeSessionID))
	}
	if len(p.IDs) > 0 {
		q.WriteString(` AND id = ANY(` + arg(p.IDs) + `::text[])`)
	}
	if !p.LiveAt.IsZero() {
		q.WriteString(` AND (expires_at IS NULL OR expires_at > ` + arg(p.LiveAt) + `)`)
	}
	if p.AfterID != "" {
		q.WriteString(` AND id > ` + arg(p.AfterID))
	}
	if p.BeforeID != "" {
		q.WriteString(` AND id < ` + arg(p.BeforeID))
	}
	if p.Descending {
		q.WriteString(` ORDER BY id DESC`)
	} else {
		q.WriteString(` ORDER BY id ASC`)
	}
	if p.Limit > 0 {
		q.WriteString(` LIMIT ` + arg(p.Limit))
	}
	rows, err := s.pool.Query(ctx, q.String(), args...)
	if err != nil {
		return nil, mapErr("list files", err)
	}
	return collect(rows, "files", scanFile)
}

// ListExpiredFiles lists files of every tenant expired at now.
func (s *Store) ListExpiredFiles(ctx context.Context, now time.Time, limit int) ([]*store.File, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := s.pool.Query(ctx, `SELECT `+fileCols+` FROM files
		WHERE expires_at IS NOT NULL AND expires_at <= $1 ORDER BY expires_at, id LIMIT $2`, now, lim)
	if err != nil {
		return nil, mapErr("list expired files", err)
	}
	return collect(rows, "files", scanFile)
}

// DeleteFile deletes the tenant's file row and returns it.
func (s *Store) DeleteFile(ctx context.Context, tenantID, id string) (*store.File, error) {
	f, err := scanFile(s.pool.QueryRow(ctx, `DELETE FROM files WHERE id = $1 AND tenant_id = $2 RETURNING `+fileCols, id, tenantID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("delete file %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("delete file "+id, err)
	}
	return f, nil
}
