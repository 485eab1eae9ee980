package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

const packageBuildCols = `tenant_id, key, environment_id, status, progress, package, log_tail, sandbox_id, version, created_at, updated_at`

func scanPackageBuild(row pgx.Row) (*store.PackageBuild, error) {
	var b store.PackageBuild
	if err := row.Scan(&b.TenantID, &b.Key, &b.EnvironmentID, &b.Status, &b.Progress, &b.Package, &b.LogTail,
		&b.SandboxID, &b.Version, &b.CreatedAt, &b.UpdatedAt); err != nil {
		return nil, err
	}
	b.CreatedAt, b.UpdatedAt = b.CreatedAt.UTC(), b.UpdatedAt.UTC()
	return &b, nil
}

// CreatePackageBuild implements store.PackageBuildStore.
func (s *Store) CreatePackageBuild(ctx context.Context, b *store.PackageBuild) (*store.PackageBuild, error) {
	in := *b
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.clock()
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	out, err := scanPackageBuild(s.pool.QueryRow(ctx, `INSERT INTO package_builds
		(`+packageBuildCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, $9, $10)
		ON CONFLICT DO NOTHING RETURNING `+packageBuildCols,
		in.TenantID, in.Key, in.EnvironmentID, in.Status, in.Progress, in.Package, in.LogTail, in.SandboxID,
		in.CreatedAt, in.UpdatedAt))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("package build %q: %w", in.Key, store.ErrAlreadyExists)
	}
	if err != nil {
		return nil, mapErr("create package build "+in.Key, err)
	}
	return out, nil
}

// GetPackageBuild implements store.PackageBuildStore.
func (s *Store) GetPackageBuild(ctx context.Context, tenantID, key string) (*store.PackageBuild, error) {
	b, err := scanPackageBuild(s.pool.QueryRow(ctx, `SELECT `+packageBuildCols+` FROM package_builds
		WHERE tenant_id = $1 AND key = $2`, tenantID, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("package build %q: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr("get package build "+key, err)
	}
	return b, nil
}

// UpdatePackageBuild implements store.PackageBuildStore.
func (s *Store) UpdatePackageBuild(ctx context.Context, b *store.PackageBuild) (*store.PackageBuild, error) {
	out, err := scanPackageBuild(s.pool.QueryRow(ctx, `UPDATE package_builds SET
		status = $1, progress = $2, package = $3, log_tail = $4, sandbox_id = $5, version = version + 1, updated_at = $6
		WHERE tenant_id = $7 AND key = $8 AND version = $9 RETURNING `+packageBuildCols,
		b.Status, b.Progress, b.Package, b.LogTail, b.SandboxID, s.clock(), b.TenantID, b.Key, b.Version))
	if errors.Is(err, pgx.ErrNoRows) {
		if _, gerr := s.GetPackageBuild(ctx, b.TenantID, b.Key); gerr != nil {
			return nil, gerr
		}
		return nil, fmt.Errorf("package build %q: version %d is not the stored one: %w", b.Key, b.Version, store.ErrConflict)
	}
	if err != nil {
		return nil, mapErr("update package build "+b.Key, err)
	}
	return out, nil
}
