package objectservertest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/objectserver"
)

// Probe checks a probe server served at base: a test-only object every
// helper implements with these methods, so the suite can see exactly what
// the helper handed the handler and what it sent back:
//
//   - echo: answers {"method", "class", "id", "mode", "args", "alarm"}, with
//     alarm null or {"id", "retry_count", "is_retry"}.
//   - apply {"ops": [{"put": k, "value": v} | {"delete": k}], "fail":
//     null | {"status": n, "message": m}}: applies ops in order, then fails
//     with the helper's error type if asked, else answers {"keys": [...]}
//     (all keys, sorted).
//   - boom: fails with the language's plain error (expected status 500,
//     message containing "boom").
func Probe(t *testing.T, base string) {
	c := client{t: t, base: base, class: "probe", id: "p-1"}
	snap := callOpts{mode: objectserver.ModeSnapshot, class: "probe", id: "p-1"}
	wt := callOpts{mode: objectserver.ModeWriteThrough, class: "probe", id: "p-1"}

	t.Run("context", func(t *testing.T) {
		c.t = t
		c.call("echo", `{"x": [1, 2]}`, snap).expect(t, "echo", 200, false,
			`{"method":"echo","class":"probe","id":"p-1","mode":"snapshot","args":{"x":[1,2]},"alarm":null}`)
		c.call("echo", ``, callOpts{}).expect(t, "echo without headers", 200, false,
			`{"method":"echo","class":"","id":"","mode":"snapshot","args":null,"alarm":null}`)
		alarmed := snap
		alarmed.alarm = &objectserver.Alarm{ID: "alarm-7", RetryCount: 2, IsRetry: true}
		c.call("echo", `"hi"`, alarmed).expect(t, "echo from a retried alarm", 200, false,
			`{"method":"echo","class":"probe","id":"p-1","mode":"snapshot","args":"hi","alarm":{"id":"alarm-7","retry_count":2,"is_retry":true}}`)
		alarmed.alarm = &objectserver.Alarm{ID: "alarm-8"}
		alarmed.mode = objectserver.ModeWriteThrough
		c.call("echo", `null`, alarmed).expect(t, "echo from an alarm, write-through", 200, true,
			`{"result":{"method":"echo","class":"probe","id":"p-1","mode":"write-through","args":null,"alarm":{"id":"alarm-8","retry_count":0,"is_retry":false}},"writes":[]}`)
	})
	t.Run("writes in order", func(t *testing.T) {
		c.t = t
		c.restore(`{"old": true}`)
		c.call("apply", `{"ops": [
			{"put": "a", "value": 1},
			{"put": "b", "value": {"x": [1, 2]}},
			{"delete": "a"},
			{"put": "c", "value": "s"},
			{"put": "b", "value": null},
			{"delete": "never-existed"}
		]}`, wt).expect(t, "apply write-through", 200, true, `{"result":{"keys":["b","c","old"]},"writes":[
			{"key":"a","value":1},
			{"key":"b","value":{"x":[1,2]}},
			{"key":"a","delete":true},
			{"key":"c","value":"s"},
			{"key":"b","value":null},
			{"key":"never-existed","delete":true}]}`)
		c.dump().expect(t, "dump after apply", 200, false, `{"b":null,"c":"s","old":true}`)
	})
	t.Run("snapshot has no envelope", func(t *testing.T) {
		c.t = t
		c.restore(`{}`)
		c.call("apply", `{"ops": [{"put": "k", "value": [true]}]}`, snap).expect(t, "apply snapshot", 200, false, `{"keys":["k"]}`)
		c.dump().expect(t, "dump", 200, false, `{"k":[true]}`)
	})
	t.Run("writes before an error count", func(t *testing.T) {
		c.t = t
		c.restore(`{}`)
		c.call("apply", `{"ops": [{"put": "x", "value": 1}, {"delete": "y"}], "fail": {"status": 409, "message": "conflict on x"}}`, wt).
			expectError(t, "apply then fail write-through", 409, true, "conflict on x",
				`[{"key":"x","value":1},{"key":"y","delete":true}]`)
		c.call("apply", `{"ops": [{"put": "z", "value": 2}], "fail": {"status": 503, "message": "later"}}`, snap).
			expectError(t, "apply then fail snapshot", 503, false, "later", "")
		c.dump().expect(t, "dump after failed calls", 200, false, `{"x":1,"z":2}`)
	})
	t.Run("plain error is 500", func(t *testing.T) {
		c.t = t
		c.call("boom", ``, snap).expectError(t, "boom", 500, false, "boom", "")
		c.call("boom", ``, wt).expectError(t, "boom write-through", 500, true, "boom", `[]`)
	})
	t.Run("chunked bodies", func(t *testing.T) {
		c.t = t
		c.chunked(objectserver.StoragePath, nil, `{"big": "`+strings.Repeat("x", 70000)+`"}`).
			expect(t, "chunked restore", 200, false, `{"ok":true}`)
		h := http.Header{objectserver.HeaderStorageMode: {objectserver.ModeSnapshot}}
		c.chunked("/apply", h, `{"ops": [{"delete": "big"}, {"put": "small", "value": "`+strings.Repeat("y", 5000)+`"}]}`).
			expect(t, "chunked call", 200, false, `{"keys":["small"]}`)
	})
	t.Run("concurrent calls", func(t *testing.T) {
		c.t = t
		c.restore(`{}`)
		concurrentApply(t, base)
	})
	t.Run("bad requests", func(t *testing.T) {
		c.t = t
		c.restore(`{"x": 1, "z": 2}`)
		c.call("echo", `{not json`, snap).expectError(t, "invalid JSON args", 400, false, "", "")
		c.call("missing", ``, snap).expectError(t, "unknown method", 404, false, "unknown method", "")
		if r := c.do(http.MethodGet, "/echo", nil, ""); r.status != http.StatusMethodNotAllowed {
			t.Errorf("GET /echo: status %d, want 405", r.status)
		}
		if r := c.do(http.MethodPost, objectserver.StoragePath, nil, `"a string"`); r.status != http.StatusBadRequest {
			t.Errorf("restore with a JSON string: status %d, want 400 (body %s)", r.status, r.body)
		}
		if r := c.do(http.MethodPost, objectserver.StoragePath, nil, `{"k": `); r.status != http.StatusBadRequest {
			t.Errorf("restore with broken JSON: status %d, want 400 (body %s)", r.status, r.body)
		}
		c.dump().expect(t, "dump unchanged by bad restores", 200, false, `{"x":1,"z":2}`)
	})
}
