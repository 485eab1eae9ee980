package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ReferencedBlobKeys implements store.BlobRefStore: one query per column
// of store.BlobKeyColumns and batch of keys. The keys travel as one JSON
// array, so the statement text (and its cached statement) does not depend
// on how many keys are asked about.
func (s *Store) ReferencedBlobKeys(ctx context.Context, keys []string) (map[string]bool, error) {
	out := map[string]bool{}
	for len(keys) > 0 {
		batch := keys[:min(len(keys), store.BlobRefBatch)]
		keys = keys[len(batch):]
		arg, err := json.Marshal(batch)
		if err != nil {
			return nil, err
		}
		for _, c := range store.BlobKeyColumns {
			if err := s.referencedIn(ctx, c, string(arg), out); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func (s *Store) referencedIn(ctx context.Context, c store.BlobKeyColumn, keysJSON string, out map[string]bool) error {
	// Table and column names come from the compiled-in list, never from input.
	rows, err := s.read.QueryContext(ctx, fmt.Sprintf(`SELECT DISTINCT %[2]s FROM %[1]s
		WHERE %[2]s <> '' AND %[2]s IN (SELECT value FROM json_each(?))`, c.Table, c.Column), keysJSON)
	if err != nil {
		return fmt.Errorf("sqlite: blob keys referenced by %s.%s: %w", c.Table, c.Column, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return fmt.Errorf("sqlite: blob keys referenced by %s.%s: %w", c.Table, c.Column, err)
		}
		out[k] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlite: blob keys referenced by %s.%s: %w", c.Table, c.Column, err)
	}
	return nil
}
