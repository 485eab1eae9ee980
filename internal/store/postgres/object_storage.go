package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

// checkStorageEntry keeps to what both engines store byte for byte: a key of
// UTF-8 text without NUL (Postgres text refuses both) and, unless deleting,
// a non-empty JSON value.
func checkStorageEntry(key string, value json.RawMessage, isDelete bool) error {
	if !utf8.ValidString(key) || strings.ContainsRune(key, 0) {
		return fmt.Errorf("storage key %q: must be UTF-8 without NUL: %w", key, store.ErrInvalid)
	}
	if !isDelete && (len(value) == 0 || !utf8.Valid(value) || !json.Valid(value)) {
		return fmt.Errorf("storage key %q: value is not valid JSON: %w", key, store.ErrInvalid)
	}
	return nil
}

// entrySize is what an entry counts against the object's StorageBytes.
func entrySize(key string, valueLen int64) int64 { return int64(len(key)) + valueLen }

// lockObjectSQL takes the object's row lock and proves it exists. Every
// storage change takes it first, so the sizes a writer reads back are of
// committed rows no other writer is changing.
const lockObjectSQL = `SELECT 1 FROM objects` + objectWhere + ` FOR NO KEY UPDATE`

// HibernateObject replaces the storage, its totals, the status and
// HibernatedAt in one transaction. The sandbox id is kept so recovery can
// find a sandbox that a crash left running.
func (s *Store) HibernateObject(ctx context.Context, key store.ObjectKey, storage map[string]json.RawMessage) (*store.Object, error) {
	return s.replaceStorage(ctx, key, storage, true)
}

// ReplaceObjectStorage replaces the storage and its totals in one
// transaction (a checkpoint).
func (s *Store) ReplaceObjectStorage(ctx context.Context, key store.ObjectKey, storage map[string]json.RawMessage) (*store.Object, error) {
	return s.replaceStorage(ctx, key, storage, false)
}

func (s *Store) replaceStorage(ctx context.Context, key store.ObjectKey, storage map[string]json.RawMessage, hibernate bool) (*store.Object, error) {
	keys := slices.Sorted(maps.Keys(storage))
	values := make([]string, len(keys))
	var size int64
	for i, k := range keys {
		if err := checkStorageEntry(k, storage[k], false); err != nil {
			return nil, err
		}
		values[i] = string(storage[k])
		size += entrySize(k, int64(len(values[i])))
	}
	now := s.clock()
	update := `UPDATE objects SET storage_keys = $4, storage_bytes = $5, version = version + 1, updated_at = $6`
	args := keyArgs(key, len(keys), size, now)
	if hibernate {
		update += `, status = $7, hibernated_at = $6`
		args = append(args, string(store.ObjectHibernating))
	}
	op := fmt.Sprintf("replace storage of %q", keyName(key))
	var out *store.Object
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := checkFences(ctx, tx, key); err != nil {
			return err
		}
		// One round trip: the lock, the delete, one insert of every entry
		// and the totals.
		b := &pgx.Batch{}
		b.Queue(lockObjectSQL, keyArgs(key)...)
		b.Queue(`DELETE FROM object_storage`+objectWhere, keyArgs(key)...)
		b.Queue(`INSERT INTO object_storage (tenant_id, class, object_id, key, value)
			SELECT $1, $2, $3, k, v::json FROM unnest($4::text[], $5::text[]) AS u(k, v)`, keyArgs(key, keys, values)...)
		b.Queue(update+objectWhere+` RETURNING `+objectCols, args...)
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		var one int
		if err := br.QueryRow().Scan(&one); err != nil {
			return mapErr(op, err)
		}
		for range 2 {
			if _, err := br.Exec(); err != nil {
				return mapErr(op, err)
			}
		}
		o, err := scanObject(br.QueryRow())
		if err != nil {
			return mapErr(op, err)
		}
		out = o
		return br.Close()
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// The write statements report the size of the entry they replaced or
// deleted (no row when there was none), from the statement's snapshot, i.e.
// before their own change.
const (
	setEntrySQL = `WITH old AS (
			SELECT octet_length(value::text) AS n FROM object_storage` + objectWhere + ` AND key = $4
		), up AS (
			INSERT INTO object_storage (tenant_id, class, object_id, key, value) VALUES ($1, $2, $3, $4, $5::text::json)
			ON CONFLICT (tenant_id, class, object_id, key) DO UPDATE SET value = excluded.value
		)
		SELECT n FROM old`
	deleteEntrySQL = `DELETE FROM object_storage` + objectWhere + ` AND key = $4 RETURNING octet_length(value::text)`
)

// queueWrites queues the lock and the writes of one object.
func queueWrites(b *pgx.Batch, key store.ObjectKey, writes []store.StorageWrite) {
	b.Queue(lockObjectSQL, keyArgs(key)...)
	for _, w := range writes {
		if w.Delete {
			b.Queue(deleteEntrySQL, keyArgs(key, w.Key)...)
		} else {
			b.Queue(setEntrySQL, keyArgs(key, w.Key, string(w.Value))...)
		}
	}
}

// readWrites reads what queueWrites queued and returns how many keys and
// bytes the writes added (negative when they removed more).
func readWrites(br pgx.BatchResults, key store.ObjectKey, writes []store.StorageWrite) (dKeys, dBytes int64, err error) {
	var one int
	if err := br.QueryRow().Scan(&one); err != nil {
		return 0, 0, mapErr(fmt.Sprintf("object %q", keyName(key)), err)
	}
	for _, w := range writes {
		var oldLen int64
		err := br.QueryRow().Scan(&oldLen)
		switch {
		case err == nil:
			dKeys--
			dBytes -= entrySize(w.Key, oldLen)
		case !errors.Is(err, pgx.ErrNoRows):
			return 0, 0, mapErr(fmt.Sprintf("write storage key %q of %q", w.Key, keyName(key)), err)
		}
		if !w.Delete {
			dKeys++
			dBytes += entrySize(w.Key, int64(len(w.Value)))
		}
	}
	return dKeys, dBytes, nil
}

const bumpTotalsSQL = `UPDATE objects SET storage_keys = storage_keys + $4, storage_bytes = storage_bytes + $5,
	version = version + 1, updated_at = $6` + objectWhere + ` RETURNING ` + objectCols

// applyWrites applies every object's writes in tx in two round trips: locks
// and writes, then the totals. Objects are taken in key order so concurrent
// batches lock in the same order. It returns the objects after the writes;
// an object with no writes keeps its Version.
func (s *Store) applyWrites(ctx context.Context, tx pgx.Tx, batch map[store.ObjectKey][]store.StorageWrite) (map[store.ObjectKey]*store.Object, error) {
	keys := slices.SortedFunc(maps.Keys(batch), func(a, b store.ObjectKey) int {
		return cmp.Or(cmp.Compare(a.TenantID, b.TenantID), cmp.Compare(a.Class, b.Class), cmp.Compare(a.ID, b.ID))
	})
	if err := checkFences(ctx, tx, keys...); err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	for _, k := range keys {
		queueWrites(b, k, batch[k])
	}
	type delta struct{ keys, bytes int64 }
	deltas := make([]delta, len(keys))
	br := tx.SendBatch(ctx, b)
	for i, k := range keys {
		dk, db, err := readWrites(br, k, batch[k])
		if err != nil {
			_ = br.Close()
			return nil, err
		}
		deltas[i] = delta{dk, db}
	}
	if err := br.Close(); err != nil {
		return nil, mapErr("apply storage writes", err)
	}

	now := s.clock()
	b = &pgx.Batch{}
	for i, k := range keys {
		if len(batch[k]) == 0 {
			b.Queue(`SELECT `+objectCols+` FROM objects`+objectWhere, keyArgs(k)...)
			continue
		}
		b.Queue(bumpTotalsSQL, keyArgs(k, deltas[i].keys, deltas[i].bytes, now)...)
	}
	br = tx.SendBatch(ctx, b)
	defer br.Close()
	out := make(map[store.ObjectKey]*store.Object, len(keys))
	for _, k := range keys {
		o, err := scanObject(br.QueryRow())
		if err != nil {
			return nil, mapErr(fmt.Sprintf("update object %q", keyName(k)), err)
		}
		out[k] = o
	}
	return out, br.Close()
}

func checkWrites(batch map[store.ObjectKey][]store.StorageWrite) error {
	for k, writes := range batch {
		if err := requireObjectKey(k); err != nil {
			return err
		}
		for _, w := range writes {
			if err := checkStorageEntry(w.Key, w.Value, w.Delete); err != nil {
				return fmt.Errorf("object %q: %w", keyName(k), err)
			}
		}
	}
	return nil
}

// ApplyStorageWrites applies writes in order in one transaction; deleting a
// missing key is not an error. Version moves once per call with at least
// one write.
func (s *Store) ApplyStorageWrites(ctx context.Context, key store.ObjectKey, writes []store.StorageWrite) (*store.Object, error) {
	batch := map[store.ObjectKey][]store.StorageWrite{key: writes}
	if err := checkWrites(batch); err != nil {
		return nil, err
	}
	var out *store.Object
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		objs, err := s.applyWrites(ctx, tx, batch)
		if err != nil {
			return err
		}
		out = objs[key]
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ApplyStorageWriteBatch applies every object's writes in one transaction
// (one commit for the group): all or none.
func (s *Store) ApplyStorageWriteBatch(ctx context.Context, batch map[store.ObjectKey][]store.StorageWrite) error {
	if len(batch) == 0 {
		return nil
	}
	if err := checkWrites(batch); err != nil {
		return err
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		_, err := s.applyWrites(ctx, tx, batch)
		return err
	})
}

// GetObjectStorage returns the object's storage ({} when empty) or
// ErrNotFound. One statement, so existence and entries share a snapshot.
func (s *Store) GetObjectStorage(ctx context.Context, key store.ObjectKey) (map[string]json.RawMessage, error) {
	rows, err := s.pool.Query(ctx, `SELECT st.key, st.value FROM objects o
		LEFT JOIN object_storage st ON st.tenant_id = o.tenant_id AND st.class = o.class AND st.object_id = o.object_id
		WHERE o.tenant_id = $1 AND o.class = $2 AND o.object_id = $3`, keyArgs(key)...)
	if err != nil {
		return nil, mapErr(fmt.Sprintf("storage of %q", keyName(key)), err)
	}
	defer rows.Close()
	var out map[string]json.RawMessage
	for rows.Next() {
		var k *string
		var v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return nil, mapErr(fmt.Sprintf("storage of %q", keyName(key)), err)
		}
		if out == nil {
			out = map[string]json.RawMessage{}
		}
		if k != nil {
			out[*k] = json.RawMessage(v)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(fmt.Sprintf("storage of %q", keyName(key)), err)
	}
	if out == nil {
		return nil, fmt.Errorf("storage of %q: %w", keyName(key), store.ErrNotFound)
	}
	return out, nil
}
