package object_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/object"
	"github.com/agentkernel/agentkernel/internal/store"
)

// With max_active_objects = 2, a third object wakes after the least
// recently used idle one hibernates.
func TestLeastRecentlyUsedHibernatesAtTheActiveLimit(t *testing.T) {
	e := newEnv(t, func(c *object.Config) { c.Limits.MaxActiveObjects = 2 })
	ctx := context.Background()
	a, b, c := key("counter", "a"), key("counter", "b"), key("counter", "c")
	status := func(k store.ObjectKey) store.ObjectStatus {
		o, err := e.st.GetObject(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		return o.Status
	}
	e.mustCall(t, a, "increment", nil)
	e.clock.Advance(time.Second)
	e.mustCall(t, b, "increment", nil)
	e.clock.Advance(time.Second)
	e.mustCall(t, c, "increment", nil)
	if status(a) != store.ObjectHibernating || status(b) != store.ObjectActive || status(c) != store.ObjectActive {
		t.Fatalf("after c: a %s, b %s, c %s", status(a), status(b), status(c))
	}
	e.clock.Advance(time.Second)
	if got := e.mustCall(t, a, "increment", nil); got != 2 {
		t.Fatalf("a after wake: %d", got)
	}
	if status(b) != store.ObjectHibernating || status(c) != store.ObjectActive {
		t.Fatalf("after a again: b %s, c %s", status(b), status(c))
	}
}

// In snapshot mode the limits are checked on the dump: over one, nothing
// is persisted and the object stays Active.
func TestSnapshotDumpOverTheLimitStaysActive(t *testing.T) {
	e := newEnv(t, func(c *object.Config) { c.Limits.MaxKeys = 3 })
	ctx := context.Background()
	k := key("counter", "big")
	if _, err := e.call(t, k, "fill", map[string]any{"keys": 4, "bytes": 10}); err != nil {
		t.Fatal(err)
	}
	var le *object.LimitError
	if _, err := e.rt.Hibernate(ctx, k); !errors.As(err, &le) || le.Limit != "durable_objects.max_keys" {
		t.Fatalf("hibernate over max_keys: %v", err)
	}
	if _, err := e.rt.Checkpoint(ctx, k); !errors.As(err, &le) {
		t.Fatalf("checkpoint over max_keys: %v", err)
	}
	o, err := e.st.GetObject(ctx, k)
	if err != nil || o.Status != store.ObjectActive || o.StorageKeys != 0 {
		t.Fatalf("after refused dumps: %+v %v", o, err)
	}
	if _, err := e.call(t, k, "del", map[string]any{"key": "k0"}); err != nil {
		t.Fatal(err)
	}
	if o, err := e.rt.Hibernate(ctx, k); err != nil || o.StorageKeys != 3 {
		t.Fatalf("hibernate at the limit: %+v %v", o, err)
	}
}

// In write-through mode a write over a limit is refused before it is
// persisted, and the object's server is given back the persisted storage.
func TestWriteThroughRefusesWritesOverTheLimits(t *testing.T) {
	e := newEnv(t, func(c *object.Config) { c.Limits.MaxKeys = 3; c.Limits.MaxValueBytes = 100 })
	ctx := context.Background()
	k := key("wcounter", "w")
	if _, err := e.call(t, k, "fill", map[string]any{"keys": 3, "bytes": 10}); err != nil {
		t.Fatal(err)
	}
	var le *object.LimitError
	if _, err := e.call(t, k, "put", map[string]any{"key": "fourth", "value": 1}); !errors.As(err, &le) || le.Limit != "durable_objects.max_keys" || le.Got != 4 {
		t.Fatalf("4th key: %v", err)
	}
	if _, err := e.call(t, k, "put", map[string]any{"key": "k0", "value": string(make([]byte, 200))}); !errors.As(err, &le) || le.Limit != "durable_objects.max_value_bytes" {
		t.Fatalf("200-byte value: %v", err)
	}
	// Replacing a key within the limits is fine.
	if _, err := e.call(t, k, "put", map[string]any{"key": "k0", "value": 7}); err != nil {
		t.Fatal(err)
	}
	st, err := e.st.GetObjectStorage(ctx, k)
	if err != nil || len(st) != 3 || string(st["k0"]) != "7" || st["fourth"] != nil {
		t.Fatalf("persisted: %v %v", st, err)
	}
	// The server was given back the persisted storage: it no longer holds
	// the refused key.
	res, err := e.rt.Call(ctx, object.CallParams{TenantID: k.TenantID, Class: k.Class, ID: k.ID, Method: "put", Args: []byte(`{"key":"k1","value":8}`)})
	if err != nil || string(res) != `{"keys":3}` {
		t.Fatalf("server storage after refusals: %s %v", res, err)
	}
}
