package sqlite

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationSource lists the migrations an Open applies; tests substitute it.
type migrationSource fs.FS

var embeddedMigrations migrationSource = mustSub(migrationFiles, "migrations")

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	return sub
}

// ErrSchemaTooNew: the database was migrated by a newer agentkernel.
var ErrSchemaTooNew = errors.New("database schema is newer than this binary")

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads NNNN_name.sql files in version order.
func loadMigrations(src fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(src, ".")
	if err != nil {
		return nil, fmt.Errorf("sqlite: read migrations: %w", err)
	}
	var out []migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("sqlite: migration %q: name must be NNNN_description.sql", e.Name())
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("sqlite: migrations %q and %q share version %d", prev, e.Name(), v)
		}
		seen[v] = e.Name()
		body, err := fs.ReadFile(src, e.Name())
		if err != nil {
			return nil, fmt.Errorf("sqlite: read migration %q: %w", e.Name(), err)
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// migrate applies every migration newer than the recorded schema version,
// each in its own transaction together with its schema_migrations row, so a
// crash mid-way leaves a consistent, resumable schema. Re-opening an
// up-to-date database changes nothing.
func (s *Store) migrate(ctx context.Context, src fs.FS) error {
	ms, err := loadMigrations(src)
	if err != nil {
		return err
	}
	// Migrations run once per Open: their statements bypass the statement
	// cache (and a migration script may hold several statements, which a
	// prepared statement cannot).
	if _, err := s.write.DB.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("sqlite: create schema_migrations: %w", err)
	}
	var current int
	if err := s.write.DB.QueryRowContext(ctx,
		`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("sqlite: read schema version: %w", err)
	}
	known := 0
	if len(ms) > 0 {
		known = ms[len(ms)-1].version
	}
	if current > known {
		return fmt.Errorf("sqlite: database schema version %d, this binary knows up to %d: upgrade agentkernel or open a different database: %w",
			current, known, ErrSchemaTooNew)
	}
	for _, m := range ms {
		if m.version <= current {
			continue
		}
		err := s.inTx(ctx, func(tx *wtx) error {
			if _, err := tx.Tx.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Tx.ExecContext(ctx,
				`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, s.timestamp().UnixMicro())
			return err
		})
		if err != nil {
			return fmt.Errorf("sqlite: apply migration %s: %w", m.name, err)
		}
		s.logger.Info("sqlite migration applied", "version", m.version, "name", m.name)
	}
	return nil
}
