package objectservertest

import (
	"net/http"
	"testing"

	"github.com/agentkernel/agentkernel/objectserver"
)

// Counter checks a counter example (increment {"amount"} / get / reset, each
// answering {"value": n}, count stored under "count") served at base, over
// the whole protocol. It starts by restoring empty storage.
func Counter(t *testing.T, base string) {
	c := client{t: t, base: base}
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
		c.call("increment", `{}`, callOpts{}).expect(t, "increment without headers", 200, false, `{"value":7}`)
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
