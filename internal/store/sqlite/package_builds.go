package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

const packageBuildCols = `tenant_id, key, environment_id, status, progress, package, log_tail, sandbox_id, version, created_at, updated_at`

func scanPackageBuild(row interface{ Scan(...any) error }) (*store.PackageBuild, error) {
	var (
		b                store.PackageBuild
		created, updated int64
	)
	if err := row.Scan(&b.TenantID, &b.Key, &b.EnvironmentID, &b.Status, &b.Progress, &b.Package, &b.LogTail,
		&b.SandboxID, &b.Version, &created, &updated); err != nil {
		return nil, err
	}
	b.CreatedAt, b.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &b, nil
}

// CreatePackageBuild implements store.PackageBuildStore.
func (s *Store) CreatePackageBuild(ctx context.Context, b *store.PackageBuild) (*store.PackageBuild, error) {
	in := *b
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.timestamp()
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	out, err := scanPackageBuild(s.write.QueryRowContext(ctx, `INSERT INTO package_builds
		(`+packageBuildCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
		ON CONFLICT DO NOTHING RETURNING `+packageBuildCols,
		in.TenantID, in.Key, in.EnvironmentID, in.Status, in.Progress, in.Package, in.LogTail, in.SandboxID,
		micros(in.CreatedAt), micros(in.UpdatedAt)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("package build %q: %w", in.Key, store.ErrAlreadyExists)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: create package build %q: %w", in.Key, err)
	}
	return out, nil
}

// GetPackageBuild implements store.PackageBuildStore.
func (s *Store) GetPackageBuild(ctx context.Context, tenantID, key string) (*store.PackageBuild, error) {
	b, err := scanPackageBuild(s.read.QueryRowContext(ctx, `SELECT `+packageBuildCols+` FROM package_builds
		WHERE tenant_id = ? AND key = ?`, tenantID, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("package build %q: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get package build %q: %w", key, err)
	}
	return b, nil
}

// UpdatePackageBuild implements store.PackageBuildStore.
func (s *Store) UpdatePackageBuild(ctx context.Context, b *store.PackageBuild) (*store.PackageBuild, error) {
	out, err := scanPackageBuild(s.write.QueryRowContext(ctx, `UPDATE package_builds SET
		status = ?, progress = ?, package = ?, log_tail = ?, sandbox_id = ?, version = version + 1, updated_at = ?
		WHERE tenant_id = ? AND key = ? AND version = ? RETURNING `+packageBuildCols,
		b.Status, b.Progress, b.Package, b.LogTail, b.SandboxID, micros(s.timestamp()), b.TenantID, b.Key, b.Version))
	if errors.Is(err, sql.ErrNoRows) {
		if _, gerr := s.GetPackageBuild(ctx, b.TenantID, b.Key); gerr != nil {
			return nil, gerr
		}
		return nil, fmt.Errorf("package build %q: version %d is not the stored one: %w", b.Key, b.Version, store.ErrConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: update package build %q: %w", b.Key, err)
	}
	return out, nil
}
