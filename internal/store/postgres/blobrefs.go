package postgres

import (
	"context"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ReferencedBlobKeys implements store.BlobRefStore: one query per column
// of store.BlobKeyColumns and batch of keys.
func (s *Store) ReferencedBlobKeys(ctx context.Context, keys []string) (map[string]bool, error) {
	out := map[string]bool{}
	for len(keys) > 0 {
		batch := keys[:min(len(keys), store.BlobRefBatch)]
		keys = keys[len(batch):]
		for _, c := range store.BlobKeyColumns {
			if err := s.referencedIn(ctx, c, batch, out); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func (s *Store) referencedIn(ctx context.Context, c store.BlobKeyColumn, keys []string, out map[string]bool) error {
	// Table and column names come from the compiled-in list, never from input.
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT DISTINCT %[2]s FROM %[1]s
		WHERE %[2]s <> '' AND %[2]s = ANY($1::text[])`, c.Table, c.Column), keys)
	if err != nil {
		return mapErr(fmt.Sprintf("blob keys referenced by %s.%s", c.Table, c.Column), err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return mapErr(fmt.Sprintf("blob keys referenced by %s.%s", c.Table, c.Column), err)
		}
		out[k] = true
	}
	return mapErr(fmt.Sprintf("blob keys referenced by %s.%s", c.Table, c.Column), rows.Err())
}
