package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

var _ store.ObjectStore = (*Store)(nil)

const objectClassCols = `tenant_id, class, image, driver, idle_timeout_seconds, init_command, max_concurrency,
	storage_mode, app_dir, env, isolation, objects_per_sandbox, created_at, updated_at`

func scanObjectClass(row pgx.Row) (*store.ObjectClass, error) {
	var (
		c            store.ObjectClass
		initCmd, env []byte
	)
	if err := row.Scan(&c.TenantID, &c.Class, &c.Image, &c.Driver, &c.IdleTimeoutSeconds, &initCmd,
		&c.MaxConcurrency, &c.StorageMode, &c.AppDir, &env, &c.Isolation, &c.ObjectsPerSandbox, &c.CreatedAt, &c.UpdatedAt); err != nil {
		return nil, err
	}
	if len(initCmd) > 0 {
		if err := json.Unmarshal(initCmd, &c.InitCommand); err != nil {
			return nil, fmt.Errorf("decode init_command: %w", err)
		}
	}
	var err error
	if c.Env, err = decodeMetadata(env); err != nil {
		return nil, err
	}
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	return &c, nil
}

// validateObjectClass rejects what the runtime could not use, so a bad
// class never reaches the table.
func validateObjectClass(c *store.ObjectClass) error {
	if c == nil || c.Class == "" {
		return fmt.Errorf("object class name is required: %w", store.ErrInvalid)
	}
	switch c.StorageMode {
	case "", "snapshot", "write-through":
	default:
		return fmt.Errorf("object class %q: storage mode %q: want snapshot or write-through: %w",
			c.Class, c.StorageMode, store.ErrInvalid)
	}
	switch c.Isolation {
	case "", "object", "class":
	default:
		return fmt.Errorf("object class %q: isolation %q: want object or class: %w", c.Class, c.Isolation, store.ErrInvalid)
	}
	if c.ObjectsPerSandbox < 0 {
		return fmt.Errorf("object class %q: objects per sandbox %d must not be negative: %w", c.Class, c.ObjectsPerSandbox, store.ErrInvalid)
	}
	if c.IdleTimeoutSeconds < 0 || c.MaxConcurrency < 0 {
		return fmt.Errorf("object class %q: idle timeout %d and max concurrency %d must not be negative: %w",
			c.Class, c.IdleTimeoutSeconds, c.MaxConcurrency, store.ErrInvalid)
	}
	return nil
}

// PutObjectClass creates or replaces a class: an upsert that keeps the first
// CreatedAt and moves UpdatedAt. Empty InitCommand and Env read back nil.
func (s *Store) PutObjectClass(ctx context.Context, c *store.ObjectClass) (*store.ObjectClass, error) {
	if err := validateObjectClass(c); err != nil {
		return nil, err
	}
	initCmd, err := tagsArg(c.InitCommand)
	if err != nil {
		return nil, fmt.Errorf("object class %q: init command: %w", c.Class, err)
	}
	env, err := metadataArg(c.Env)
	if err != nil {
		return nil, fmt.Errorf("object class %q: env: %w", c.Class, err)
	}
	now := s.clock()
	out, err := scanObjectClass(s.pool.QueryRow(ctx, `INSERT INTO object_classes (`+objectClassCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)
		ON CONFLICT (tenant_id, class) DO UPDATE SET image = excluded.image, driver = excluded.driver,
			idle_timeout_seconds = excluded.idle_timeout_seconds, init_command = excluded.init_command,
			max_concurrency = excluded.max_concurrency, storage_mode = excluded.storage_mode,
			app_dir = excluded.app_dir, env = excluded.env, isolation = excluded.isolation,
			objects_per_sandbox = excluded.objects_per_sandbox, updated_at = excluded.updated_at
		RETURNING `+objectClassCols,
		c.TenantID, c.Class, c.Image, c.Driver, c.IdleTimeoutSeconds, initCmd, c.MaxConcurrency,
		c.StorageMode, c.AppDir, env, c.Isolation, c.ObjectsPerSandbox, now))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("put object class %q", c.Class), err)
	}
	return out, nil
}

// GetObjectClass returns one tenant's class or ErrNotFound.
func (s *Store) GetObjectClass(ctx context.Context, tenantID, class string) (*store.ObjectClass, error) {
	c, err := scanObjectClass(s.pool.QueryRow(ctx, `SELECT `+objectClassCols+` FROM object_classes
		WHERE tenant_id = $1 AND class = $2`, tenantID, class))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("object class %q", class), err)
	}
	return c, nil
}

// ListObjectClasses lists one tenant's classes (” is the internal owner,
// not "every tenant") ordered by name.
func (s *Store) ListObjectClasses(ctx context.Context, tenantID string) ([]*store.ObjectClass, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+objectClassCols+` FROM object_classes
		WHERE tenant_id = $1 ORDER BY class`, tenantID)
	if err != nil {
		return nil, mapErr("list object classes", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.ObjectClass, error) { return scanObjectClass(row) })
	if err != nil {
		return nil, mapErr("list object classes", err)
	}
	if out == nil {
		out = []*store.ObjectClass{}
	}
	return out, nil
}

// DeleteObjectClass removes a class. Objects of the class stay: the runtime
// decides what happens to them.
func (s *Store) DeleteObjectClass(ctx context.Context, tenantID, class string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM object_classes WHERE tenant_id = $1 AND class = $2`, tenantID, class)
	if err != nil {
		return mapErr(fmt.Sprintf("delete object class %q", class), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete object class %q: %w", class, store.ErrNotFound)
	}
	return nil
}
