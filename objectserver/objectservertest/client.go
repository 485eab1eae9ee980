// Package objectservertest is the contract suite for in-sandbox object
// servers: every helper (Go, Python, Node) and every scaffold runs it, so
// they all speak exactly the protocol the daemon expects.
package objectservertest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/objectserver"
)

// client talks to one object server.
type client struct {
	t    *testing.T
	base string
	// class and id name the object restore and dump are for.
	class, id string
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// callOpts are the daemon's per-call headers.
type callOpts struct {
	mode, class, id string
	alarm           *objectserver.Alarm
}

func (c client) do(method, path string, h http.Header, body string) response {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// chunked POSTs body with Transfer-Encoding: chunked, as a daemon that
// streams a request would.
func (c client) chunked(path string, h http.Header, body string) response {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.base+path, io.NopCloser(strings.NewReader(body)))
	if err != nil {
		c.t.Fatal(err)
	}
	req.ContentLength = -1
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("POST %s: read body: %v", path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func (c client) call(method, args string, o callOpts) response {
	c.t.Helper()
	h := http.Header{}
	if o.mode != "" {
		h.Set(objectserver.HeaderStorageMode, o.mode)
	}
	if o.class != "" {
		h.Set(objectserver.HeaderObjectClass, o.class)
	}
	if o.id != "" {
		h.Set(objectserver.HeaderObjectID, o.id)
	}
	if a := o.alarm; a != nil {
		h.Set(objectserver.HeaderAlarmID, a.ID)
		h.Set(objectserver.HeaderAlarmRetryCount, itoa(a.RetryCount))
		h.Set(objectserver.HeaderAlarmIsRetry, map[bool]string{true: "true", false: "false"}[a.IsRetry])
	}
	return c.do(http.MethodPost, "/"+method, h, args)
}

// objectHeader names an object as the daemon does on every request but
// GET /__health.
func objectHeader(class, id string) http.Header {
	h := http.Header{}
	h.Set(objectserver.HeaderObjectClass, class)
	h.Set(objectserver.HeaderObjectID, id)
	return h
}

// restore and dump are the daemon's POST and GET /__storage for the
// client's object.
func (c client) restore(storage string) { c.restoreFor(c.id, storage) }

func (c client) dump() response { return c.dumpFor(c.id) }

func (c client) restoreFor(id, storage string) {
	c.t.Helper()
	r := c.do(http.MethodPost, objectserver.StoragePath, objectHeader(c.class, id), storage)
	if r.status/100 != 2 {
		c.t.Fatalf("restore %s of %q: status %d, body %s", storage, id, r.status, r.body)
	}
}

func (c client) dumpFor(id string) response {
	c.t.Helper()
	return c.do(http.MethodGet, objectserver.StoragePath, objectHeader(c.class, id), "")
}

// expect checks the status, whether the write-through envelope header is
// set, and that the body is JSON equal to want.
func (r response) expect(t *testing.T, what string, status int, envelope bool, want string) {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: status %d, want %d (body %s)", what, r.status, status, r.body)
	}
	if got := r.header.Get(objectserver.HeaderEnvelope) == "1"; got != envelope {
		t.Errorf("%s: envelope header present = %v, want %v", what, got, envelope)
	}
	if ct := r.header.Get("Content-Type"); !bytes.HasPrefix([]byte(ct), []byte("application/json")) {
		t.Errorf("%s: Content-Type %q, want application/json", what, ct)
	}
	jsonEqual(t, what, r.body, want)
}

// expectError checks an error response: the status, the envelope, a
// non-empty message (containing mustContain), and the writes when enveloped.
func (r response) expectError(t *testing.T, what string, status int, envelope bool, mustContain, wantWrites string) {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: status %d, want %d (body %s)", what, r.status, status, r.body)
	}
	if got := r.header.Get(objectserver.HeaderEnvelope) == "1"; got != envelope {
		t.Errorf("%s: envelope header present = %v, want %v", what, got, envelope)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("%s: body %s is not a JSON object: %v", what, r.body, err)
	}
	var msg string
	if err := json.Unmarshal(body["error"], &msg); err != nil || msg == "" {
		t.Errorf("%s: body %s has no non-empty string \"error\"", what, r.body)
	}
	if !bytes.Contains([]byte(msg), []byte(mustContain)) {
		t.Errorf("%s: error %q does not contain %q", what, msg, mustContain)
	}
	wantKeys := 1
	if envelope {
		wantKeys = 2
		jsonEqual(t, what+" writes", body["writes"], wantWrites)
	}
	if len(body) != wantKeys {
		t.Errorf("%s: body %s has unexpected fields", what, r.body)
	}
}

func jsonEqual(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s: body %q is not JSON: %v", what, got, err)
		return
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad expectation %q: %v", what, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: body %s, want %s", what, got, want)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
