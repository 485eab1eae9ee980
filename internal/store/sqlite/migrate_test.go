package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agentkernel/agentkernel/internal/store"
)

type migrationRow struct {
	version   int
	appliedAt int64
}

func migrationRows(t *testing.T, s *Store) []migrationRow {
	t.Helper()
	rows, err := s.read.QueryContext(context.Background(), `SELECT version, applied_at FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatalf("read schema_migrations: %v", err)
	}
	defer rows.Close()
	var out []migrationRow
	for rows.Next() {
		var r migrationRow
		if err := rows.Scan(&r.version, &r.appliedAt); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestReopenAppliesNoMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSession(ctx, store.CreateSessionParams{ID: "sesn_keep"}); err != nil {
		t.Fatal(err)
	}
	first := migrationRows(t, s)
	embedded, err := loadMigrations(embeddedMigrations)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != len(embedded) || len(first) == 0 {
		t.Fatalf("schema_migrations has %d rows, want one per embedded migration (%d)", len(first), len(embedded))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	for range 2 {
		s, err = Open(ctx, path)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		again := migrationRows(t, s)
		if len(again) != len(first) {
			t.Fatalf("reopen changed schema_migrations: %v -> %v", first, again)
		}
		for i := range first {
			if again[i] != first[i] {
				t.Fatalf("reopen re-applied migration %d: %v -> %v", first[i].version, first[i], again[i])
			}
		}
		if ok, err := s.SessionExists(ctx, "sesn_keep"); err != nil || !ok {
			t.Fatalf("data lost across reopen: %v %v", ok, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	// A newer agentkernel recorded a migration this binary does not know.
	if _, err := s.write.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at)
		VALUES (9999, '9999_from_the_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path)
	if err == nil {
		_ = s.Close()
		t.Fatal("Open accepted a database with a newer schema")
	}
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "9999") {
		t.Fatalf("error %q: want ErrSchemaTooNew naming version 9999", err)
	}
}

// TestLaterMigrationApplies: a database made by an older binary gets only
// the migrations it lacks.
func TestLaterMigrationApplies(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	v1, err := fs.ReadFile(embeddedMigrations, "0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	older := fstest.MapFS{"0001_init.sql": {Data: v1}}
	s, err := Open(ctx, path, withMigrations(older))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSession(ctx, store.CreateSessionParams{ID: "sesn_old"}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()

	newer := fstest.MapFS{
		"0001_init.sql":  {Data: v1},
		"0002_notes.sql": {Data: []byte(`CREATE TABLE notes (id TEXT PRIMARY KEY); INSERT INTO notes VALUES ('n1');`)},
	}
	s, err = Open(ctx, path, withMigrations(newer))
	if err != nil {
		t.Fatalf("open with a new migration: %v", err)
	}
	defer s.Close()
	rows := migrationRows(t, s)
	if len(rows) != 2 || rows[1].version != 2 {
		t.Fatalf("schema_migrations: %v", rows)
	}
	var n int
	if err := s.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM notes`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("migration 2 ran %d times (%v)", n, err)
	}
	if ok, _ := s.SessionExists(ctx, "sesn_old"); !ok {
		t.Fatal("data lost by migration 2")
	}
}

func TestBadMigrationFails(t *testing.T) {
	ctx := context.Background()
	for name, files := range map[string]fstest.MapFS{
		"bad name":   {"init.sql": {Data: []byte(`SELECT 1;`)}},
		"duplicate":  {"0001_a.sql": {Data: []byte(`SELECT 1;`)}, "0001_b.sql": {Data: []byte(`SELECT 1;`)}},
		"broken SQL": {"0001_a.sql": {Data: []byte(`CREATE TABLE (;`)}},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			s, err := Open(ctx, path, withMigrations(files))
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded")
			}
			if name != "broken SQL" {
				return
			}
			// The failed migration left no version row behind.
			db, err := sql.Open(availableDrivers()[0].name, path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var n int
			if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n != 0 {
				t.Fatalf("schema_migrations rows after a failed migration: %d (%v)", n, err)
			}
		})
	}
}

// TestTwoStoresOneFile: two stores on one file (as the daemon and the CLI
// would be) write concurrently; BEGIN IMMEDIATE plus busy_timeout makes them
// queue instead of failing with SQLITE_BUSY.
func TestTwoStoresOneFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	a, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.CreateSession(ctx, store.CreateSessionParams{ID: "sesn_shared"}); err != nil {
		t.Fatal(err)
	}
	const each = 50
	errs := make(chan error, 2*each)
	done := make(chan struct{})
	for _, s := range []*Store{a, b} {
		go func() {
			defer func() { done <- struct{}{} }()
			for range each {
				if _, err := s.AppendMessages(ctx, "sesn_shared", []store.NewMessage{{Role: "user", Content: []byte(`1`)}}); err != nil {
					errs <- err
				}
			}
		}()
	}
	<-done
	<-done
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent writer failed: %v", err)
	}
	n, err := b.CountMessages(ctx, "sesn_shared")
	if err != nil || n != 2*each {
		t.Fatalf("messages: %d (%v), want %d", n, err, 2*each)
	}
}

func TestOpenRejectsBadPath(t *testing.T) {
	_, err := Open(context.Background(), "state.db?mode=ro")
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid", err)
	}
}
