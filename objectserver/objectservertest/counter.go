package objectservertest

import (
	"net/http"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/objectserver"
)

// Counter checks a counter example (increment {"amount"} / get / reset, each
// answering {"value": n}, count stored under "count") served at base, over
// the whole protocol. It starts by restoring empty storage.
func Counter(t *testing.T, base string) {
	c := client{t: t, base: base, class: "counter", id: "a"}
	snap := callOpts{mode: objectserver.ModeSnapshot, class: "counter", id: "a"}
	wt := callOpts{mode: objectserver.ModeWriteThrough, class: "counter", id: "a"}

	t.Run("health", func(t *testing.T) {
		c.t = t
		c.do(http.MethodGet, objectserver.HealthPath, nil, "").expect(t, "GET /__health", 200, false, `{"ok":true}`)
	})
	t.Run("increment", func(t *testing.T) {
		c.t = t
		c.restore(`{}`)
		c.call("increment", `{"amount": 5}`, snap).expect(t, "increment 5", 200, false, `{"value":5}`)
		c.call("increment", ``, snap).expect(t, "increment without args", 200, false, `{"value":6}`)
		c.call("increment", `{}`, callOpts{class: "counter", id: "a"}).expect(t, "increment without a storage mode", 200, false, `{"value":7}`)
		c.call("get", ``, snap).expect(t, "get", 200, false, `{"value":7}`)
		c.dump().expect(t, "dump", 200, false, `{"count":7}`)
	})
	t.Run("restore replaces", func(t *testing.T) {
		c.t = t
		c.restore(`{"count": 40, "other": {"nested": [1, "two", null]}}`)
		c.dump().expect(t, "dump after restore", 200, false, `{"count":40,"other":{"nested":[1,"two",null]}}`)
		c.call("increment", `{"amount": 2}`, snap).expect(t, "increment after restore", 200, false, `{"value":42}`)
		c.restore(`{"count": 1}`)
		c.dump().expect(t, "dump after second restore", 200, false, `{"count":1}`)
		c.restore(`{}`)
		c.dump().expect(t, "dump after empty restore", 200, false, `{}`)
		c.call("get", ``, snap).expect(t, "get after empty restore", 200, false, `{"value":0}`)
		r := c.do(http.MethodPost, objectserver.StoragePath, nil, `[1, 2]`)
		if r.status != http.StatusBadRequest {
			t.Errorf("restore with a JSON array: status %d, want 400 (body %s)", r.status, r.body)
		}
	})
	t.Run("write-through envelope", func(t *testing.T) {
		c.t = t
		c.restore(`{"count": 1}`)
		c.call("increment", `{"amount": 2}`, wt).expect(t, "increment write-through", 200, true,
			`{"result":{"value":3},"writes":[{"key":"count","value":3}]}`)
		c.call("get", ``, wt).expect(t, "get write-through", 200, true, `{"result":{"value":3},"writes":[]}`)
		c.call("reset", ``, wt).expect(t, "reset write-through", 200, true,
			`{"result":{"value":0},"writes":[{"key":"count","delete":true}]}`)
		c.dump().expect(t, "dump after reset", 200, false, `{}`)
		c.call("increment", `{"amount": "lots"}`, wt).expectError(t, "bad amount write-through", 400, true, "amount", `[]`)
		c.call("nope", `{}`, wt).expectError(t, "unknown method write-through", 404, true, "unknown method", `[]`)
	})
	t.Run("errors", func(t *testing.T) {
		c.t = t
		c.restore(`{"count": 9}`)
		c.call("increment", `{"amount": "lots"}`, snap).expectError(t, "bad amount", 400, false, "amount", "")
		c.call("increment", `{"amount": 1.5}`, snap).expectError(t, "fractional amount", 400, false, "amount", "")
		c.call("nope", `{}`, snap).expectError(t, "unknown method", 404, false, "unknown method", "")
		c.call("get", ``, snap).expect(t, "get after errors", 200, false, `{"value":9}`)
	})
}

// ManyObjects checks a counter server that serves many objects (a class
// with isolation "class"): it says so on GET /__health, keeps storage per
// object id, forgets an object on DELETE /__storage, and serves calls to
// different objects at once. Run it with Counter.
func ManyObjects(t *testing.T, base string) {
	c := client{t: t, base: base, class: "counter"}
	opts := func(id string) callOpts { return callOpts{mode: objectserver.ModeSnapshot, class: "counter", id: id} }
	t.Run("health says many", func(t *testing.T) {
		c.t = t
		r := c.do(http.MethodGet, objectserver.HealthPath, nil, "")
		if r.status != 200 || r.header.Get(objectserver.HeaderObjects) != objectserver.ObjectsMany {
			t.Fatalf("GET /__health: status %d, %s %q: want 200 and %q", r.status, objectserver.HeaderObjects, r.header.Get(objectserver.HeaderObjects), objectserver.ObjectsMany)
		}
	})
	t.Run("storage per object", func(t *testing.T) {
		c.t = t
		c.restoreFor("m1", `{"count": 10}`)
		c.restoreFor("m2", `{"count": 20, "x": true}`)
		c.call("increment", `{"amount": 1}`, opts("m1")).expect(t, "m1 increment", 200, false, `{"value":11}`)
		c.call("increment", `{"amount": 2}`, opts("m2")).expect(t, "m2 increment", 200, false, `{"value":22}`)
		c.call("get", ``, opts("m3")).expect(t, "m3, never restored", 200, false, `{"value":0}`)
		c.dumpFor("m1").expect(t, "m1 dump", 200, false, `{"count":11}`)
		c.dumpFor("m2").expect(t, "m2 dump", 200, false, `{"count":22,"x":true}`)
		c.call("increment", `{"amount": 5}`, callOpts{mode: objectserver.ModeWriteThrough, class: "counter", id: "m1"}).expect(t, "m1 write-through", 200, true,
			`{"result":{"value":16},"writes":[{"key":"count","value":16}]}`)
		c.dumpFor("m2").expect(t, "m2 after m1's write", 200, false, `{"count":22,"x":true}`)
	})
	t.Run("DELETE forgets one object", func(t *testing.T) {
		c.t = t
		c.restoreFor("d1", `{"count": 1}`)
		c.restoreFor("d2", `{"count": 2}`)
		r := c.do(http.MethodDelete, objectserver.StoragePath, objectHeader("counter", "d1"), "")
		if r.status/100 != 2 {
			t.Fatalf("DELETE /__storage: status %d, body %s", r.status, r.body)
		}
		c.dumpFor("d1").expect(t, "d1 after DELETE", 200, false, `{}`)
		c.dumpFor("d2").expect(t, "d2 after d1's DELETE", 200, false, `{"count":2}`)
	})
	t.Run("concurrent objects", func(t *testing.T) {
		c.t = t
		const objects, calls = 8, 20
		for i := range objects {
			c.restoreFor("c"+itoa(i), `{}`)
		}
		var wg sync.WaitGroup
		for i := range objects {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// One object's calls arrive one at a time, as the daemon sends them.
				for range calls {
					r := c.call("increment", `{"amount": 1}`, opts("c"+itoa(i)))
					if r.status != 200 {
						t.Errorf("c%d increment: %d %s", i, r.status, r.body)
						return
					}
				}
			}()
		}
		wg.Wait()
		for i := range objects {
			c.dumpFor("c"+itoa(i)).expect(t, "c"+itoa(i)+" dump", 200, false, `{"count":`+itoa(calls)+`}`)
		}
	})
}
