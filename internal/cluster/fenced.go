package cluster

import (
	"context"
	"encoding/json"

	"github.com/agentkernel/agentkernel/internal/store"
)

// FencedObjects returns st with every object write that depends on
// ownership fenced by this node's leases (store.WithFences): once another
// node took an object over, this node's writes to it fail with
// store.ErrFenced instead of overwriting the new owner's.
func (n *Node) FencedObjects(st store.ObjectStore) store.ObjectStore {
	return &fencedObjects{ObjectStore: st, fences: n.Fences}
}

type fencedObjects struct {
	store.ObjectStore
	fences store.Fences
}

func (f *fencedObjects) fenced(ctx context.Context) context.Context {
	return store.WithFences(ctx, f.fences)
}

func (f *fencedObjects) SetObjectActive(ctx context.Context, key store.ObjectKey, sandboxID string) (*store.Object, error) {
	return f.ObjectStore.SetObjectActive(f.fenced(ctx), key, sandboxID)
}

func (f *fencedObjects) HibernateObject(ctx context.Context, key store.ObjectKey, storage map[string]json.RawMessage) (*store.Object, error) {
	return f.ObjectStore.HibernateObject(f.fenced(ctx), key, storage)
}

func (f *fencedObjects) ReplaceObjectStorage(ctx context.Context, key store.ObjectKey, storage map[string]json.RawMessage) (*store.Object, error) {
	return f.ObjectStore.ReplaceObjectStorage(f.fenced(ctx), key, storage)
}

func (f *fencedObjects) ApplyStorageWrites(ctx context.Context, key store.ObjectKey, writes []store.StorageWrite) (*store.Object, error) {
	return f.ObjectStore.ApplyStorageWrites(f.fenced(ctx), key, writes)
}

func (f *fencedObjects) ApplyStorageWriteBatch(ctx context.Context, batch map[store.ObjectKey][]store.StorageWrite) error {
	return f.ObjectStore.ApplyStorageWriteBatch(f.fenced(ctx), batch)
}

func (f *fencedObjects) MarkAlarmFired(ctx context.Context, id, lastError string) error {
	return f.ObjectStore.MarkAlarmFired(f.fenced(ctx), id, lastError)
}
