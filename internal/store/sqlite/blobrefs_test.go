package sqlite

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestEveryBlobKeyColumnIsRegistered: every column of the schema named
// like blob_key is in store.BlobKeyColumns, so the blob GC sees its keys.
func TestEveryBlobKeyColumnIsRegistered(t *testing.T) {
	s := openTemp(t)
	rows, err := s.read.QueryContext(context.Background(), `SELECT m.name, p.name
		FROM sqlite_master m, pragma_table_info(m.name) p
		WHERE m.type = 'table' AND p.name LIKE '%blob%key%'`)
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
