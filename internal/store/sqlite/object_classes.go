package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

var _ store.ObjectStore = (*Store)(nil)

const objectClassCols = `tenant_id, class, image, driver, idle_timeout_seconds, init_command, max_concurrency,
	storage_mode, app_dir, env, isolation, objects_per_sandbox, created_at, updated_at`

func scanObjectClass(r scanner) (*store.ObjectClass, error) {
	var (
		c                store.ObjectClass
		initCmd, env     sql.NullString
		created, updated int64
	)
	if err := r.Scan(&c.TenantID, &c.Class, &c.Image, &c.Driver, &c.IdleTimeoutSeconds, &initCmd,
		&c.MaxConcurrency, &c.StorageMode, &c.AppDir, &env, &c.Isolation, &c.ObjectsPerSandbox, &created, &updated); err != nil {
		return nil, err
	}
	if initCmd.Valid {
		if err := json.Unmarshal([]byte(initCmd.String), &c.InitCommand); err != nil {
			return nil, fmt.Errorf("sqlite: decode init_command: %w", err)
		}
	}
	var err error
	if c.Env, err = decodeMap(env); err != nil {
		return nil, err
	}
	c.CreatedAt, c.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &c, nil
}

// validateObjectClass rejects what the runtime could not use. Modes and
// numbers are checked here so a bad class never reaches the table.
func validateObjectClass(c *store.ObjectClass) error {
	if c == nil {
		return fmt.Errorf("object class is required: %w", store.ErrInvalid)
	}
	if err := requireID("object class name", c.Class); err != nil {
		return err
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

// PutObjectClass implements store.ObjectStore: an upsert that keeps the
// first CreatedAt and moves UpdatedAt. Empty InitCommand and Env read back
// nil.
func (s *Store) PutObjectClass(ctx context.Context, c *store.ObjectClass) (*store.ObjectClass, error) {
	if err := validateObjectClass(c); err != nil {
		return nil, err
	}
	var initCmd sql.NullString
	if len(c.InitCommand) > 0 {
		initCmd = encodeTags(c.InitCommand)
	}
	var env sql.NullString
	if len(c.Env) > 0 {
		env = encodeMap(c.Env)
	}
	now := micros(s.timestamp())
	out, err := scanObjectClass(s.write.QueryRowContext(ctx, `INSERT INTO object_classes (`+objectClassCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant_id, class) DO UPDATE SET image = excluded.image, driver = excluded.driver,
			idle_timeout_seconds = excluded.idle_timeout_seconds, init_command = excluded.init_command,
			max_concurrency = excluded.max_concurrency, storage_mode = excluded.storage_mode,
			app_dir = excluded.app_dir, env = excluded.env, isolation = excluded.isolation,
			objects_per_sandbox = excluded.objects_per_sandbox, updated_at = excluded.updated_at
		RETURNING `+objectClassCols,
		c.TenantID, c.Class, c.Image, c.Driver, c.IdleTimeoutSeconds, initCmd, c.MaxConcurrency,
		c.StorageMode, c.AppDir, env, c.Isolation, c.ObjectsPerSandbox, now, now))
	if err != nil {
		return nil, fmt.Errorf("sqlite: put object class %q: %w", c.Class, err)
	}
	return out, nil
}

// GetObjectClass implements store.ObjectStore.
func (s *Store) GetObjectClass(ctx context.Context, tenantID, class string) (*store.ObjectClass, error) {
	c, err := scanObjectClass(s.read.QueryRowContext(ctx, `SELECT `+objectClassCols+` FROM object_classes
		WHERE tenant_id = ? AND class = ?`, tenantID, class))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("object class %q: %w", class, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get object class %q: %w", class, err)
	}
	return c, nil
}

// ListObjectClasses implements store.ObjectStore: one tenant's classes
// (” is the internal owner, not "every tenant"), ordered by name.
func (s *Store) ListObjectClasses(ctx context.Context, tenantID string) ([]*store.ObjectClass, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+objectClassCols+` FROM object_classes
		WHERE tenant_id = ? ORDER BY class`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list object classes: %w", err)
	}
	defer rows.Close()
	out := []*store.ObjectClass{}
	for rows.Next() {
		c, err := scanObjectClass(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: scan object class: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// DeleteObjectClass implements store.ObjectStore. Objects of the class stay:
// the runtime decides what happens to them.
func (s *Store) DeleteObjectClass(ctx context.Context, tenantID, class string) error {
	res, err := s.write.ExecContext(ctx, `DELETE FROM object_classes WHERE tenant_id = ? AND class = ?`, tenantID, class)
	if err != nil {
		return fmt.Errorf("sqlite: delete object class %q: %w", class, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("object class %q: %w", class, store.ErrNotFound)
	}
	return nil
}
