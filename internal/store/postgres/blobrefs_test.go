package postgres

import (
	"context"
	"slices"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
)

// TestEveryBlobKeyColumnIsRegistered: a column that holds blob keys but is
// missing from store.BlobKeyColumns would have its blobs deleted by the
// blob GC. Every column named like blob_key must be registered.
func TestEveryBlobKeyColumnIsRegistered(t *testing.T) {
	s := openTest(t)
	rows, err := s.pool.Query(context.Background(), `SELECT table_name, column_name
		FROM information_schema.columns
		WHERE table_schema = current_schema() AND column_name LIKE '%blob%key%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var c store.BlobKeyColumn
		if err := rows.Scan(&c.Table, &c.Column); err != nil {
			t.Fatal(err)
		}
		n++
		if !slices.Contains(store.BlobKeyColumns, c) {
			t.Errorf("%s.%s holds blob keys but is not in store.BlobKeyColumns: the blob GC would delete its blobs", c.Table, c.Column)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(store.BlobKeyColumns) {
		t.Errorf("schema has %d blob key columns, store.BlobKeyColumns lists %d: %v", n, len(store.BlobKeyColumns), store.BlobKeyColumns)
	}
}
