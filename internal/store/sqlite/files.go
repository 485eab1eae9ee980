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

const fileCols = `id, tenant_id, filename, mime_type, size_bytes, sha256, blob_key, downloadable, scope_session_id, expires_at, created_at`

func scanFile(r scanner) (*store.File, error) {
	var (
		f       store.File
		expires sql.NullInt64
		created int64
	)
	if err := r.Scan(&f.ID, &f.TenantID, &f.Filename, &f.MimeType, &f.SizeBytes, &f.SHA256, &f.BlobKey,
		&f.Downloadable, &f.ScopeSessionID, &expires, &created); err != nil {
		return nil, err
	}
	f.ExpiresAt = timePtr(expires)
	f.CreatedAt = fromMicros(created)
	return &f, nil
}

// CreateFile implements store.FileStore.
func (s *Store) CreateFile(ctx context.Context, f *store.File) (*store.File, error) {
	in := *f
	if in.ID == "" || in.BlobKey == "" {
		return nil, fmt.Errorf("sqlite: create file: id and blob key are required")
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.timestamp()
	}
	out, err := scanFile(s.write.QueryRowContext(ctx, `INSERT INTO files (`+fileCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING `+fileCols,
		in.ID, in.TenantID, in.Filename, in.MimeType, in.SizeBytes, in.SHA256, in.BlobKey,
		in.Downloadable, in.ScopeSessionID, nullMicros(in.ExpiresAt), micros(in.CreatedAt)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("file %q: %w", in.ID, store.ErrAlreadyExists)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: create file %q: %w", in.ID, err)
	}
	return out, nil
}

// GetFile implements store.FileStore.
func (s *Store) GetFile(ctx context.Context, tenantID, id string) (*store.File, error) {
	f, err := scanFile(s.read.QueryRowContext(ctx, `SELECT `+fileCols+` FROM files WHERE id = ? AND tenant_id = ?`, id, tenantID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("file %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get file %q: %w", id, err)
	}
	return f, nil
}

// ListFiles implements store.FileStore.
func (s *Store) ListFiles(ctx context.Context, p store.ListFilesParams) ([]*store.File, error) {
	q := strings.Builder{}
	q.WriteString(`SELECT ` + fileCols + ` FROM files WHERE tenant_id = ?`)
	args := []any{p.TenantID}
	if p.ScopeSessionID != "" {
		q.WriteString(` AND scope_session_id = ?`)
		args = append(args, p.ScopeSessionID)
	}
	if len(p.IDs) > 0 {
		q.WriteString(` AND id IN (?` + strings.Repeat(`, ?`, len(p.IDs)-1) + `)`)
		for _, id := range p.IDs {
			args = append(args, id)
		}
	}
	if !p.LiveAt.IsZero() {
		q.WriteString(` AND (expires_at IS NULL OR expires_at > ?)`)
		args = append(args, micros(p.LiveAt))
	}
	if p.AfterID != "" {
		q.WriteString(` AND id > ?`)
		args = append(args, p.AfterID)
	}
	if p.BeforeID != "" {
		q.WriteString(` AND id < ?`)
		args = append(args, p.BeforeID)
	}
	if p.Descending {
		q.WriteString(` ORDER BY id DESC`)
	} else {
		q.WriteString(` ORDER BY id ASC`)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	q.WriteString(` LIMIT ?`)
	args = append(args, limit)
	rows, err := s.read.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list files: %w", err)
	}
	return collect(rows, "files", scanFile)
}

// ListExpiredFiles implements store.FileStore.
func (s *Store) ListExpiredFiles(ctx context.Context, now time.Time, limit int) ([]*store.File, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+fileCols+` FROM files
		WHERE expires_at IS NOT NULL AND expires_at <= ? ORDER BY expires_at, id LIMIT ?`, micros(now), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list expired files: %w", err)
	}
	return collect(rows, "files", scanFile)
}

// DeleteFile implements store.FileStore.
func (s *Store) DeleteFile(ctx context.Context, tenantID, id string) (*store.File, error) {
	f, err := scanFile(s.write.QueryRowContext(ctx, `DELETE FROM files WHERE id = ? AND tenant_id = ? RETURNING `+fileCols, id, tenantID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("file %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: delete file %q: %w", id, err)
	}
	return f, nil
}
