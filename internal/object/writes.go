package object

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// writeThrough checks an answer's storage writes against the limits and
// makes them durable (group-committed with other objects' writes) before
// the caller gets the answer. Refused writes leave the store as it was.
func (r *Runtime) writeThrough(ctx context.Context, a *actor, writes []store.StorageWrite) error {
	for _, w := range writes {
		if w.Key == "" {
			return &FieldError{"writes.key", "the object's helper sent a write with an empty key"}
		}
		if !w.Delete && !json.Valid(w.Value) {
			return &FieldError{"writes.value", fmt.Sprintf("the object's helper sent key %q with a value that is not JSON", w.Key)}
		}
	}
	a.life.Lock()
	if a.sizes == nil {
		st, err := r.st.GetObjectStorage(ctx, a.key)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			a.life.Unlock()
			return err
		}
		a.sizes, a.total = map[string]int64{}, 0
		for k, v := range st {
			a.sizes[k] = entrySize(k, v)
			a.total += entrySize(k, v)
		}
	}
	// Check on a copy of the changed keys, then apply to the mirror only if
	// every limit holds.
	changed := map[string]int64{} // -1 = deleted
	keys, total := int64(len(a.sizes)), a.total
	for _, w := range writes {
		old, had := changed[w.Key]
		if !had {
			var ok bool
			old, ok = a.sizes[w.Key]
			if !ok {
				old = -1
			}
		}
		if old >= 0 {
			keys--
			total -= old
		}
		n := int64(-1)
		if !w.Delete {
			if int64(len(w.Value)) > r.lim.MaxValueBytes {
				a.life.Unlock()
				return &LimitError{Limit: "durable_objects.max_value_bytes", Max: r.lim.MaxValueBytes, Got: int64(len(w.Value)), What: fmt.Sprintf("size of the value of key %q of %s in bytes", w.Key, subject(a.key))}
			}
			n = entrySize(w.Key, w.Value)
			keys++
			total += n
		}
		changed[w.Key] = n
	}
	if err := r.checkTotals(a.key, keys, total); err != nil {
		a.life.Unlock()
		return err
	}
	for k, n := range changed {
		if n < 0 {
			delete(a.sizes, k)
		} else {
			a.sizes[k] = n
		}
	}
	a.total = total
	a.life.Unlock()
	if err := r.commits.commit(ctx, a.key, writes); err != nil {
		a.life.Lock()
		a.sizes = nil // reload from the store next time
		a.life.Unlock()
		return fmt.Errorf("persist the storage writes of %s: %w", subject(a.key), err)
	}
	return nil
}

// checkTotals enforces max_keys and max_storage_bytes.
func (r *Runtime) checkTotals(key store.ObjectKey, keys, total int64) error {
	if keys > r.lim.MaxKeys {
		return &LimitError{Limit: "durable_objects.max_keys", Max: r.lim.MaxKeys, Got: keys, What: "storage keys of " + subject(key)}
	}
	if total > r.lim.MaxStorageBytes {
		return &LimitError{Limit: "durable_objects.max_storage_bytes", Max: r.lim.MaxStorageBytes, Got: total, What: "storage bytes of " + subject(key)}
	}
	return nil
}

// checkDump enforces every storage limit on a whole dump (hibernation,
// checkpoint): over a limit, nothing is persisted.
func (r *Runtime) checkDump(key store.ObjectKey, st map[string]json.RawMessage) error {
	var total int64
	for k, v := range st {
		if k == "" {
			return &FieldError{"storage", "GET /__storage returned an empty key"}
		}
		if n := int64(len(v)); n > r.lim.MaxValueBytes {
			return &LimitError{Limit: "durable_objects.max_value_bytes", Max: r.lim.MaxValueBytes, Got: n, What: fmt.Sprintf("size of the value of key %q of %s in bytes", k, subject(key))}
		}
		total += entrySize(k, v)
	}
	return r.checkTotals(key, int64(len(st)), total)
}

// entrySize is what a key costs against max_storage_bytes: its name and
// its value, as the store counts it.
func entrySize(k string, v json.RawMessage) int64 { return int64(len(k) + len(v)) }
