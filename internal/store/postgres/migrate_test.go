package postgres

import (
	"context"
	"errors"
	"sync"
	"testing"
)

func TestMigrateConcurrentOpensApplyOnce(t *testing.T) {
	url := testURL(t)
	schema := freshSchema(t, url)
	ctx := context.Background()

	const nodes = 4
	stores := make([]*Store, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = Open(ctx, url, WithSchema(schema))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: open: %v", i, err)
		}
		t.Cleanup(func() { _ = stores[i].Close() })
	}

	all, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	var rows, max int
	if err := stores[0].pool.QueryRow(ctx, "SELECT count(*), coalesce(max(version), 0) FROM schema_migrations").Scan(&rows, &max); err != nil {
		t.Fatal(err)
	}
	if rows != len(all) || max != all[len(all)-1].version {
		t.Fatalf("schema_migrations has %d rows up to %d, want %d up to %d", rows, max, len(all), all[len(all)-1].version)
	}

	// Reopening an up-to-date schema applies nothing and succeeds.
	again, err := Open(ctx, url, WithSchema(schema))
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	_ = again.Close()
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES (9999, 'from_the_future')"); err != nil {
		t.Fatal(err)
	}
	other, err := Open(ctx, testURL(t), WithSchema(s.schema))
	if err == nil {
		_ = other.Close()
		t.Fatal("open succeeded on a schema with an unknown newer migration")
	}
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("err = %v, want ErrSchemaTooNew", err)
	}
}

func TestOpenRejectsBadSchemaName(t *testing.T) {
	url := testURL(t)
	if s, err := Open(context.Background(), url, WithSchema(`x"; DROP TABLE y`)); err == nil {
		_ = s.Close()
		t.Fatal("open accepted a schema name that is not an identifier")
	}
}
