package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// ErrSchemaTooNew: the database was migrated by a newer agentkernel. Opening
// it with this binary could corrupt data, so Open refuses.
var ErrSchemaTooNew = errors.New("database schema is newer than this binary")

type migration struct {
	version int
	name    string
	sql     string
}

// migrations lists the embedded files named NNNN_name.sql in version order.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("postgres: read migrations: %w", err)
	}
	var out []migration
	for _, e := range entries {
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("postgres: migration file %q: want NNNN_name.sql", e.Name())
		}
		body, err := fs.ReadFile(migrationFS, "migrations/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("postgres: read migration %s: %w", e.Name(), err)
		}
		out = append(out, migration{version: v, name: name, sql: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("postgres: two migrations numbered %d", out[i].version)
		}
	}
	return out, nil
}

// migrateLockKey is the advisory lock serialising migrations of one schema
// across serve nodes that start together.
func migrateLockKey(schema string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("agentkernel/migrate/" + schema))
	return int64(h.Sum64())
}

// migrate applies pending migrations, each in its own transaction, while
// holding a session-level advisory lock on one pooled connection.
func (s *Store) migrate(ctx context.Context) error {
	all, err := migrations()
	if err != nil {
		return err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate: acquire: %w", err)
	}
	defer conn.Release()

	key := migrateLockKey(s.schema)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		return fmt.Errorf("postgres: migrate: lock: %w", err)
	}
	// Unlock even when ctx is cancelled, or the connection returns to the
	// pool still holding the lock.
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", key); err != nil {
			s.log.Warn("postgres: migrate: unlock failed", "err", err)
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("postgres: migrate: create schema_migrations: %w", err)
	}
	var current int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&current); err != nil {
		return fmt.Errorf("postgres: migrate: read version: %w", err)
	}
	latest := 0
	if len(all) > 0 {
		latest = all[len(all)-1].version
	}
	if current > latest {
		return fmt.Errorf("postgres: database is at migration %d, this binary knows up to %d; upgrade agentkernel: %w",
			current, latest, ErrSchemaTooNew)
	}
	for _, m := range all {
		if m.version <= current {
			continue
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return fmt.Errorf("postgres: migrate %04d: begin: %w", m.version, err)
		}
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			_ = tx.Rollback(ctx)
			return fmt.Errorf("postgres: migrate %04d_%s: %w", m.version, m.name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			_ = tx.Rollback(ctx)
			return fmt.Errorf("postgres: migrate %04d: record: %w", m.version, err)
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("postgres: migrate %04d: commit: %w", m.version, err)
		}
		s.log.Info("postgres: applied migration", "version", m.version, "name", m.name)
	}
	// Still under the lock: two nodes never move the same session.
	return s.migrateSessions(ctx, conn.Conn())
}
