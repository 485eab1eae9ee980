package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentkernel/agentkernel/internal/store"
)

// checkStorageKey and checkStorageValue keep to what both engines can store
// byte for byte: UTF-8 text without NUL (Postgres text refuses both) and a
// non-empty JSON value.
func checkStorageKey(key string) error {
	if !utf8.ValidString(key) || strings.ContainsRune(key, 0) {
		return fmt.Errorf("storage key %q: must be UTF-8 without NUL: %w", key, store.ErrInvalid)
	}
	return nil
}

func checkStorageValue(key string, v json.RawMessage) error {
	if len(v) == 0 || !utf8.Valid(v) || !json.Valid(v) {
		return fmt.Errorf("storage key %q: value is not valid JSON: %w", key, store.ErrInvalid)
	}
	return nil
}

// entrySize is what an entry counts against the object's StorageBytes.
func entrySize(key string, valueLen int64) int64 { return int64(len(key)) + valueLen }

// requireObjectTx checks that the object exists inside tx, before anything
// is written for it.
func requireObjectTx(ctx context.Context, tx *wtx, key store.ObjectKey) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM objects`+objectWhere, keyArgs(key)...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("object %q: %w", keyName(key), store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("sqlite: read object %q: %w", keyName(key), err)
	}
	return nil
}

// HibernateObject implements store.ObjectStore: the storage, its totals, the
// status and HibernatedAt change in one transaction. The sandbox id is kept
// so recovery can find a sandbox that a crash left running.
func (s *Store) HibernateObject(ctx context.Context, key store.ObjectKey, storage map[string]json.RawMessage) (*store.Object, error) {
	return s.replaceStorage(ctx, key, storage, true)
}

// ReplaceObjectStorage implements store.ObjectStore (a checkpoint).
func (s *Store) ReplaceObjectStorage(ctx context.Context, key store.ObjectKey, storage map[string]json.RawMessage) (*store.Object, error) {
	return s.replaceStorage(ctx, key, storage, false)
}

func (s *Store) replaceStorage(ctx context.Context, key store.ObjectKey, storage map[string]json.RawMessage, hibernate bool) (*store.Object, error) {
	now := micros(s.timestamp())
	var out *store.Object
	err := s.inTx(ctx, func(tx *wtx) error {
		if err := checkFences(ctx, tx, key); err != nil {
			return err
		}
		if err := requireObjectTx(ctx, tx, key); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM object_storage`+objectWhere, keyArgs(key)...); err != nil {
			return fmt.Errorf("sqlite: clear storage of %q: %w", keyName(key), err)
		}
		ins, err := tx.PrepareContext(ctx, `INSERT INTO object_storage (tenant_id, class, object_id, key, value)
			VALUES (?, ?, ?, ?, ?)`)
		if err != nil {
			return fmt.Errorf("sqlite: prepare storage insert: %w", err)
		}
		defer ins.Close()
		var size int64
		// Sorted, and each entry checked as it is written: a bad entry
		// fails the transaction part-way, which must then leave nothing.
		for _, k := range slices.Sorted(maps.Keys(storage)) {
			v := storage[k]
			if err := checkStorageKey(k); err != nil {
				return err
			}
			if err := checkStorageValue(k, v); err != nil {
				return err
			}
			if _, err := ins.ExecContext(ctx, key.TenantID, key.Class, key.ID, k, []byte(v)); err != nil {
				return fmt.Errorf("sqlite: write storage key %q of %q: %w", k, keyName(key), err)
			}
			size += entrySize(k, int64(len(v)))
		}
		q := `UPDATE objects SET storage_keys = ?, storage_bytes = ?, version = version + 1, updated_at = ?`
		args := []any{len(storage), size, now}
		if hibernate {
			q += `, status = ?, hibernated_at = ?`
			args = append(args, store.ObjectHibernating, now)
		}
		out, err = scanObject(tx.QueryRowContext(ctx, q+objectWhere+` RETURNING `+objectCols,
			append(args, keyArgs(key)...)...))
		if err != nil {
			return fmt.Errorf("sqlite: update object %q: %w", keyName(key), err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// storageWriter applies StorageWrites inside one transaction with
// statements prepared once, and tracks how the totals move.
type storageWriter struct {
	drv                          driver
	old, upsert, del, bump, read *sql.Stmt
}

func (s *Store) prepareStorageWriter(ctx context.Context, tx *wtx) (*storageWriter, error) {
	w := storageWriter{drv: s.drv}
	var err error
	for _, p := range []struct {
		dst **sql.Stmt
		q   string
	}{
		{&w.old, `SELECT length(value) FROM object_storage` + objectWhere + ` AND key = ?`},
		{&w.upsert, `INSERT INTO object_storage (tenant_id, class, object_id, key, value) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (tenant_id, class, object_id, key) DO UPDATE SET value = excluded.value`},
		{&w.del, `DELETE FROM object_storage` + objectWhere + ` AND key = ?`},
		{&w.bump, `UPDATE objects SET storage_keys = storage_keys + ?, storage_bytes = storage_bytes + ?,
			version = version + 1, updated_at = ?` + objectWhere + ` RETURNING ` + objectCols},
		{&w.read, `SELECT ` + objectCols + ` FROM objects` + objectWhere},
	} {
		if *p.dst, err = tx.PrepareContext(ctx, p.q); err != nil {
			w.close()
			return nil, fmt.Errorf("sqlite: prepare storage writes: %w", err)
		}
	}
	return &w, nil
}

func (w *storageWriter) close() {
	for _, st := range []*sql.Stmt{w.old, w.upsert, w.del, w.bump, w.read} {
		if st != nil {
			_ = st.Close()
		}
	}
}

// apply writes in order and returns how many keys and bytes they added
// (negative when they removed more).
func (w *storageWriter) apply(ctx context.Context, key store.ObjectKey, writes []store.StorageWrite) (dKeys, dBytes int64, err error) {
	for _, wr := range writes {
		if err := checkStorageKey(wr.Key); err != nil {
			return 0, 0, err
		}
		if !wr.Delete {
			if err := checkStorageValue(wr.Key, wr.Value); err != nil {
				return 0, 0, err
			}
		}
		var oldLen int64
		err := w.old.QueryRowContext(ctx, key.TenantID, key.Class, key.ID, wr.Key).Scan(&oldLen)
		exists := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, 0, fmt.Errorf("sqlite: read storage key %q of %q: %w", wr.Key, keyName(key), err)
		}
		if exists {
			dKeys--
			dBytes -= entrySize(wr.Key, oldLen)
		}
		if wr.Delete {
			if exists {
				if _, err := w.del.ExecContext(ctx, key.TenantID, key.Class, key.ID, wr.Key); err != nil {
					return 0, 0, fmt.Errorf("sqlite: delete storage key %q of %q: %w", wr.Key, keyName(key), err)
				}
			}
			continue
		}
		_, err = w.upsert.ExecContext(ctx, key.TenantID, key.Class, key.ID, wr.Key, []byte(wr.Value))
		if w.drv.isForeignKey(err) {
			return 0, 0, fmt.Errorf("object %q: %w", keyName(key), store.ErrNotFound)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("sqlite: write storage key %q of %q: %w", wr.Key, keyName(key), err)
		}
		dKeys++
		dBytes += entrySize(wr.Key, int64(len(wr.Value)))
	}
	return dKeys, dBytes, nil
}

// applyObjectWrites applies one object's writes and moves its totals and
// Version (unless there were no writes). A missing object shows as the
// foreign key refusing an insert or as the final UPDATE matching no row;
// either way the caller's transaction rolls back.
func (w *storageWriter) applyObjectWrites(ctx context.Context, key store.ObjectKey,
	writes []store.StorageWrite, now int64) (*store.Object, error) {
	if err := requireObjectKey(key); err != nil {
		return nil, err
	}
	var row *sql.Row
	if len(writes) == 0 {
		row = w.read.QueryRowContext(ctx, keyArgs(key)...)
	} else {
		dKeys, dBytes, err := w.apply(ctx, key, writes)
		if err != nil {
			return nil, err
		}
		row = w.bump.QueryRowContext(ctx, append([]any{dKeys, dBytes, now}, keyArgs(key)...)...)
	}
	o, err := scanObject(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("object %q: %w", keyName(key), store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: update object %q: %w", keyName(key), err)
	}
	return o, nil
}

// ApplyStorageWrites implements store.ObjectStore: the writes in order, in
// one transaction; deleting a missing key is not an error. Version moves
// once per call with at least one write.
func (s *Store) ApplyStorageWrites(ctx context.Context, key store.ObjectKey, writes []store.StorageWrite) (*store.Object, error) {
	now := micros(s.timestamp())
	var out *store.Object
	err := s.inTx(ctx, func(tx *wtx) error {
		if err := checkFences(ctx, tx, key); err != nil {
			return err
		}
		w, err := s.prepareStorageWriter(ctx, tx)
		if err != nil {
			return err
		}
		defer w.close()
		out, err = w.applyObjectWrites(ctx, key, writes, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ApplyStorageWriteBatch implements store.ObjectStore: every object's writes
// in one transaction (one commit for the group), objects in key order.
func (s *Store) ApplyStorageWriteBatch(ctx context.Context, batch map[store.ObjectKey][]store.StorageWrite) error {
	if len(batch) == 0 {
		return nil
	}
	now := micros(s.timestamp())
	keys := sortedObjectKeys(batch)
	return s.inTx(ctx, func(tx *wtx) error {
		if err := checkFences(ctx, tx, keys...); err != nil {
			return err
		}
		w, err := s.prepareStorageWriter(ctx, tx)
		if err != nil {
			return err
		}
		defer w.close()
		for _, key := range keys {
			if _, err := w.applyObjectWrites(ctx, key, batch[key], now); err != nil {
				return err
			}
		}
		return nil
	})
}

func sortedObjectKeys[V any](m map[store.ObjectKey]V) []store.ObjectKey {
	return slices.SortedFunc(maps.Keys(m), func(a, b store.ObjectKey) int {
		return cmp.Or(cmp.Compare(a.TenantID, b.TenantID), cmp.Compare(a.Class, b.Class), cmp.Compare(a.ID, b.ID))
	})
}

// GetObjectStorage implements store.ObjectStore. One statement, so the
// existence check and the entries come from one snapshot.
func (s *Store) GetObjectStorage(ctx context.Context, key store.ObjectKey) (map[string]json.RawMessage, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT st.key, st.value FROM objects o
		LEFT JOIN object_storage st ON st.tenant_id = o.tenant_id AND st.class = o.class AND st.object_id = o.object_id
		WHERE o.tenant_id = ? AND o.class = ? AND o.object_id = ?`, keyArgs(key)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read storage of %q: %w", keyName(key), err)
	}
	defer rows.Close()
	var out map[string]json.RawMessage
	for rows.Next() {
		var k sql.NullString
		var v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("sqlite: scan storage of %q: %w", keyName(key), err)
		}
		if out == nil {
			out = map[string]json.RawMessage{}
		}
		if k.Valid {
			out[k.String] = json.RawMessage(v)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read storage of %q: %w", keyName(key), err)
	}
	if out == nil {
		return nil, fmt.Errorf("object %q: %w", keyName(key), store.ErrNotFound)
	}
	return out, nil
}
