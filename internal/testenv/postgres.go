package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
)

// FreshPostgres creates a database no other test uses on the test
// PostgreSQL (skipping, or failing in CI, without one), drops it at
// cleanup, and returns its URL. prefix names the database (prefix_<hex>).
func FreshPostgres(t testing.TB, prefix string) string {
	t.Helper()
	base := PostgresURL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := prefix + "_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}
