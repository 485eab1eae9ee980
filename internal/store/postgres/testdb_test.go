package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/testenv"
)

// testURL returns the database URL: Postgres tests need a real server. A
// missing one skips them locally and fails them in CI (testenv).
func testURL(tb testing.TB) string {
	tb.Helper()
	return testenv.PostgresURL(tb)
}

// freshSchema names a schema no other test uses and drops it (with
// everything in it) when the test ends.
func freshSchema(tb testing.TB, url string) string {
	tb.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "test_" + hex.EncodeToString(b[:])
	tb.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			tb.Errorf("drop schema %s: connect: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// openTest opens a store in its own fresh schema, closed at cleanup.
func openTest(tb testing.TB, opts ...Option) *Store {
	tb.Helper()
	url := testURL(tb)
	schema := freshSchema(tb, url)
	s, err := Open(context.Background(), url, append([]Option{WithSchema(schema)}, opts...)...)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}
