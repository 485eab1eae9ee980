package postgres

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestEveryBlobKeyColumnIsRegistered: every column of the schema named
// like blob_key is in store.BlobKeyColumns, so the blob GC sees its keys.
func TestEveryBlobKeyColumnIsRegistered(t *testing.T) {
	s := openTest(t)
	rows, err := s.pool.Query(context.Background(), `SELECT table_name, column_name
		FROM information_schema.columns
		WHERE table_schema = current_schema() AND column_name LIKE '%blob%key%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []store.BlobKeyColumn
	for rows.Next() {
		var c store.BlobKeyColumn
		if err := rows.Scan(&c.Table, &c.Column); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	storetest.CheckBlobKeyColumns(t, cols)
}
