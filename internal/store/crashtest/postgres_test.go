package crashtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/testenv"
)

// postgresURL returns the test database URL or skips: the Postgres run needs
// a real server, and CI always sets the variable.
func postgresURL(t *testing.T) string {
	t.Helper()
	return testenv.PostgresURL(t)
}

// freshSchema names a schema no other run uses (the engine creates it) and
// drops it when the test ends.
func freshSchema(t *testing.T, url string) string {
	t.Helper()
	var b [8]byte
	rand.Read(b[:])
	schema := "crashtest_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop schema %s: connect: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}
