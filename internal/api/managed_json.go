package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strings"
)

// obj is a JSON object of a Managed Agents request body, read field by
// field: presence and null are visible, which update semantics need ("omit
// to preserve; null to clear"), and every accessor records the key it
// looked at. Objects nested in one body share a tree, and strict refuses
// the body if any object in it has a key no parser read: the list of
// accepted fields is the parsers themselves, never written down twice.
type obj struct {
	path string // "" at the top, else e.g. "events[0]"
	m    map[string]json.RawMessage
	read map[string]bool
	tree *objTree
}

// objTree is every object parsed from one request body.
type objTree struct{ nodes []obj }

// decodeObject reads the request body as one JSON object within the body
// limit. An empty body is an empty object (archive calls send none).
func decodeObject(r *http.Request) (obj, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return obj{}, Errorf(http.StatusUnsupportedMediaType, TypeInvalidRequest, "Content-Type must be application/json, got %q", ct)
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if e := asTooLarge(err); e != nil {
			return obj{}, e
		}
		return obj{}, BadRequest("reading the request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return newObj("", map[string]json.RawMessage{}, nil), nil
	}
	return parseObject("", body)
}

// newObj starts a tree when tree is nil, else joins it.
func newObj(path string, m map[string]json.RawMessage, tree *objTree) obj {
	if tree == nil {
		tree = &objTree{}
	}
	o := obj{path: path, m: m, read: map[string]bool{}, tree: tree}
	tree.nodes = append(tree.nodes, o)
	return o
}

// parseObject parses b as a JSON object that starts a tree of its own.
func parseObject(path string, b []byte) (obj, error) { return parseIn(path, b, nil) }

// child parses b as an object nested in o (same tree).
func (o obj) child(path string, b []byte) (obj, error) { return parseIn(path, b, o.tree) }

// sub makes an object nested in o from fields already parsed (same tree).
func (o obj) sub(path string, m map[string]json.RawMessage) obj { return newObj(path, m, o.tree) }

func parseIn(path string, b []byte, tree *objTree) (obj, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return obj{}, BadRequest("%s: expected a JSON object, got JSON %s", orBody(path), typ.Value)
		}
		return obj{}, jsonError(err)
	}
	if m == nil {
		return obj{}, BadRequest("%s: expected a JSON object, got null", orBody(path))
	}
	return newObj(path, m, tree), nil
}

// strict refuses the body if any object parsed from it has a field no
// parser read: an unknown field, or one agentkernel forgot to handle.
// Handlers call it after parsing and before writing anything.
func (o obj) strict() error {
	for _, n := range o.tree.nodes {
		keys := make([]string, 0, len(n.m))
		for k := range n.m {
			if !n.read[k] {
				keys = append(keys, k)
			}
		}
		if len(keys) > 0 {
			sort.Strings(keys)
			return BadRequest("unknown field %q", n.field(keys[0]))
		}
	}
	return nil
}

// notYet is the 400 for a field the SDK defines and agentkernel does not
// serve yet: accepting it would store a promise nothing keeps.
func (o obj) notYet(k, why string) error {
	return BadRequest("field %q is not supported yet: %s", o.field(k), why)
}

func orBody(path string) string {
	if path == "" {
		return "request body"
	}
	return path
}

// field names a field for error messages: "name", "events[0].type".
func (o obj) field(k string) string {
	if o.path == "" {
		return k
	}
	return o.path + "." + k
}

// has reports a field that is present (perhaps null) and marks it read;
// every accessor goes through it.
func (o obj) has(k string) bool {
	_, ok := o.m[k]
	if ok {
		o.read[k] = true
	}
	return ok
}

// null reports a field that is present and JSON null.
func (o obj) null(k string) bool {
	v, ok := o.m[k]
	return ok && bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// set reports a field that is present and not null.
func (o obj) set(k string) bool { return o.has(k) && !o.null(k) }

func (o obj) typeErr(k, want string) error {
	return BadRequest("field %q must be %s", o.field(k), want)
}

// str reads an optional string field ("" when absent or null).
func (o obj) str(k string) (string, error) {
	if !o.set(k) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(o.m[k], &s); err != nil {
		return "", o.typeErr(k, "a string")
	}
	return s, nil
}

// reqStr reads a required, non-empty string field.
func (o obj) reqStr(k string) (string, error) {
	s, err := o.str(k)
	if err == nil && strings.TrimSpace(s) == "" {
		err = BadRequest("field %q is required", o.field(k))
	}
	return s, err
}

func (o obj) int(k string) (int64, bool, error) {
	if !o.set(k) {
		return 0, false, nil
	}
	var n int64
	if err := json.Unmarshal(o.m[k], &n); err != nil {
		return 0, false, o.typeErr(k, "an integer")
	}
	return n, true, nil
}

func (o obj) bool(k string) (bool, error) {
	if !o.set(k) {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(o.m[k], &b); err != nil {
		return false, o.typeErr(k, "a boolean")
	}
	return b, nil
}

// object reads an optional nested object.
func (o obj) object(k string) (obj, bool, error) {
	if !o.set(k) {
		return obj{}, false, nil
	}
	sub, err := o.child(o.field(k), o.m[k])
	if err != nil {
		return obj{}, false, o.typeErr(k, "an object")
	}
	return sub, true, nil
}

// notYetUnlessEmpty refuses a field that is not supported yet unless it
// holds nothing (absent, null, [] or {}): the SDK sends the empty value
// for a field left out, and a client may clear one with it.
func (o obj) notYetUnlessEmpty(k, why string) error {
	if !o.set(k) {
		return nil
	}
	switch v := string(bytes.Join(bytes.Fields(o.m[k]), nil)); {
	case v == "[]" || v == "{}":
		return nil
	case v[0] != '[' && v[0] != '{':
		return o.typeErr(k, "an array or an object")
	}
	return o.notYet(k, why)
}

// opaque reads an optional object whose keys are the caller's own (a JSON
// Schema, tool arguments): it is checked to be an object and kept as is.
func (o obj) opaque(k string) (json.RawMessage, bool, error) {
	if !o.set(k) {
		return nil, false, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(o.m[k], &m); err != nil || m == nil {
		return nil, false, o.typeErr(k, "an object")
	}
	return o.m[k], true, nil
}

// array reads an optional array of raw elements (nil when absent or null).
func (o obj) array(k string) ([]json.RawMessage, error) {
	if !o.set(k) {
		return nil, nil
	}
	var a []json.RawMessage
	if err := json.Unmarshal(o.m[k], &a); err != nil {
		return nil, o.typeErr(k, "an array")
	}
	if a == nil {
		a = []json.RawMessage{}
	}
	return a, nil
}

// objects reads an optional array of objects.
func (o obj) objects(k string) ([]obj, error) {
	raw, err := o.array(k)
	if err != nil || raw == nil {
		return nil, err
	}
	out := make([]obj, len(raw))
	for i, b := range raw {
		p := fmt.Sprintf("%s[%d]", o.field(k), i)
		if out[i], err = o.child(p, b); err != nil {
			return nil, BadRequest("field %q must be an object", p)
		}
	}
	return out, nil
}

func (o obj) strings(k string) ([]string, error) {
	if !o.set(k) {
		return nil, nil
	}
	var a []string
	if err := json.Unmarshal(o.m[k], &a); err != nil {
		return nil, o.typeErr(k, "an array of strings")
	}
	return a, nil
}

// Metadata limits (the SDK's documented bounds).
const (
	maxMetadataKeys   = 16
	maxMetadataKeyLen = 64
	maxMetadataValLen = 512
)

// metadataPatch applies the field k of o onto cur: a string upserts, null
// (or "", where the SDK says so) deletes. replace starts from empty.
func (o obj) metadataPatch(k string, cur map[string]string, emptyDeletes bool) (map[string]string, error) {
	out := map[string]string{}
	for kk, v := range cur {
		out[kk] = v
	}
	if !o.has(k) {
		return out, nil
	}
	if o.null(k) {
		return map[string]string{}, nil
	}
	var patch map[string]*string
	if err := json.Unmarshal(o.m[k], &patch); err != nil {
		return nil, o.typeErr(k, "an object of string values")
	}
	keys := make([]string, 0, len(patch))
	for kk := range patch {
		keys = append(keys, kk)
	}
	sort.Strings(keys)
	for _, kk := range keys {
		v := patch[kk]
		if v == nil || (emptyDeletes && *v == "") {
			delete(out, kk)
			continue
		}
		if kk == "" || len(kk) > maxMetadataKeyLen {
			return nil, BadRequest("field %q: key %q must be 1 to %d characters", o.field(k), kk, maxMetadataKeyLen)
		}
		if len(*v) > maxMetadataValLen {
			return nil, BadRequest("field %q: value is %d characters; the limit is %d", o.field(k)+"."+kk, len(*v), maxMetadataValLen)
		}
		out[kk] = *v
	}
	if len(out) > maxMetadataKeys {
		return nil, BadRequest("field %q has %d keys; the limit is %d", o.field(k), len(out), maxMetadataKeys)
	}
	return out, nil
}

// limitLen refuses a string field longer than n characters.
func (o obj) limitLen(k, v string, n int) error {
	if len([]rune(v)) > n {
		return BadRequest("field %q is %d characters; the limit is %d", o.field(k), len([]rune(v)), n)
	}
	return nil
}

// mustJSON marshals values agentkernel built itself.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("api: marshal %T: %v", v, err))
	}
	return b
}
