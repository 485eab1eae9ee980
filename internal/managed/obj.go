package managed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// Obj is a JSON object of a Managed Agents request body, read field by
// field: presence and null are visible, which update semantics need ("omit
// to preserve; null to clear"), and every accessor records the key it
// looked at. Objects nested in one body share a tree, and strict refuses
// the body if any object in it has a key no parser read: the list of
// accepted fields is the parsers themselves, never written down twice.
type Obj struct {
	path string // "" at the top, else e.g. "events[0]"
	m    map[string]json.RawMessage
	read map[string]bool
	tree *objTree
}

// objTree is every object parsed from one request body.
type objTree struct{ nodes []Obj }

// ParseBody parses a request body as one JSON object that starts a tree
// of its own. An empty body is an empty object (archive calls send none).
func ParseBody(body []byte) (Obj, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return newObj("", map[string]json.RawMessage{}, nil), nil
	}
	return parseObject("", body)
}

// newObj starts a tree when tree is nil, else joins it.
func newObj(path string, m map[string]json.RawMessage, tree *objTree) Obj {
	if tree == nil {
		tree = &objTree{}
	}
	o := Obj{path: path, m: m, read: map[string]bool{}, tree: tree}
	tree.nodes = append(tree.nodes, o)
	return o
}

// parseObject parses b as a JSON object that starts a tree of its own.
func parseObject(path string, b []byte) (Obj, error) { return parseIn(path, b, nil) }

// child parses b as an object nested in o (same tree).
func (o Obj) Child(path string, b []byte) (Obj, error) { return parseIn(path, b, o.tree) }

// sub makes an object nested in o from fields already parsed (same tree).
func (o Obj) Sub(path string, m map[string]json.RawMessage) Obj { return newObj(path, m, o.tree) }

func parseIn(path string, b []byte, tree *objTree) (Obj, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return Obj{}, badRequest("%s: expected a JSON object, got JSON %s", orBody(path), typ.Value)
		}
		return Obj{}, syntaxError(err)
	}
	if m == nil {
		return Obj{}, badRequest("%s: expected a JSON object, got null", orBody(path))
	}
	return newObj(path, m, tree), nil
}

// strict refuses the body if any object parsed from it has a field no
// parser read: an unknown field, or one agentkernel forgot to handle.
// Handlers call it after parsing and before writing anything.
func (o Obj) Strict() error {
	for _, n := range o.tree.nodes {
		keys := make([]string, 0, len(n.m))
		for k := range n.m {
			if !n.read[k] {
				keys = append(keys, k)
			}
		}
		if len(keys) > 0 {
			sort.Strings(keys)
			e := inputErr(http.StatusBadRequest, "unknown field %q", n.Field(keys[0]))
			e.Field = n.Field(keys[0])
			return e
		}
	}
	return nil
}

// notYet is the 400 for a field the SDK defines and agentkernel does not
// serve yet: accepting it would store a promise nothing keeps.
func (o Obj) NotYet(k, why string) error {
	return badRequest("field %q is not supported yet: %s", o.Field(k), why)
}

func orBody(path string) string {
	if path == "" {
		return "request body"
	}
	return path
}

// Path is where o sits in the body ("" at the top, else e.g. "events[0]").
func (o Obj) Path() string { return o.path }

// Raw is the field's JSON as sent, without marking it read.
func (o Obj) Raw(k string) json.RawMessage { return o.m[k] }

// Keys are the object's fields, sorted.
func (o Obj) Keys() []string {
	keys := make([]string, 0, len(o.m))
	for k := range o.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Map is the object's fields as sent (the caller must not change it).
func (o Obj) Map() map[string]json.RawMessage { return o.m }

// field names a field for error messages: "name", "events[0].type".
func (o Obj) Field(k string) string {
	if o.path == "" {
		return k
	}
	return o.path + "." + k
}

// has reports a field that is present (perhaps null) and marks it read;
// every accessor goes through it.
func (o Obj) Has(k string) bool {
	_, ok := o.m[k]
	if ok {
		o.read[k] = true
	}
	return ok
}

// null reports a field that is present and JSON null.
func (o Obj) Null(k string) bool {
	v, ok := o.m[k]
	return ok && bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// set reports a field that is present and not null.
func (o Obj) Set(k string) bool { return o.Has(k) && !o.Null(k) }

func (o Obj) TypeErr(k, want string) error {
	return badRequest("field %q must be %s", o.Field(k), want)
}

// str reads an optional string field ("" when absent or null).
func (o Obj) Str(k string) (string, error) {
	if !o.Set(k) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(o.m[k], &s); err != nil {
		return "", o.TypeErr(k, "a string")
	}
	return s, nil
}

// reqStr reads a required, non-empty string field.
func (o Obj) ReqStr(k string) (string, error) {
	s, err := o.Str(k)
	if err == nil && strings.TrimSpace(s) == "" {
		err = badRequest("field %q is required", o.Field(k))
	}
	return s, err
}

func (o Obj) Int(k string) (int64, bool, error) {
	if !o.Set(k) {
		return 0, false, nil
	}
	var n int64
	if err := json.Unmarshal(o.m[k], &n); err != nil {
		return 0, false, o.TypeErr(k, "an integer")
	}
	return n, true, nil
}

func (o Obj) Bool(k string) (bool, error) {
	if !o.Set(k) {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(o.m[k], &b); err != nil {
		return false, o.TypeErr(k, "a boolean")
	}
	return b, nil
}

// object reads an optional nested object.
func (o Obj) Object(k string) (Obj, bool, error) {
	if !o.Set(k) {
		return Obj{}, false, nil
	}
	sub, err := o.Child(o.Field(k), o.m[k])
	if err != nil {
		return Obj{}, false, o.TypeErr(k, "an object")
	}
	return sub, true, nil
}

// notYetUnlessEmpty refuses a field that is not supported yet unless it
// holds nothing (absent, null, [] or {}): the SDK sends the empty value
// for a field left out, and a client may clear one with it.
func (o Obj) NotYetUnlessEmpty(k, why string) error {
	if !o.Set(k) {
		return nil
	}
	switch v := string(bytes.Join(bytes.Fields(o.m[k]), nil)); {
	case v == "[]" || v == "{}":
		return nil
	case v[0] != '[' && v[0] != '{':
		return o.TypeErr(k, "an array or an object")
	}
	return o.NotYet(k, why)
}

// opaque reads an optional object whose keys are the caller's own (a JSON
// Schema, tool arguments): it is checked to be an object and kept as is.
func (o Obj) Opaque(k string) (json.RawMessage, bool, error) {
	if !o.Set(k) {
		return nil, false, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(o.m[k], &m); err != nil || m == nil {
		return nil, false, o.TypeErr(k, "an object")
	}
	return o.m[k], true, nil
}

// array reads an optional array of raw elements (nil when absent or null).
func (o Obj) Array(k string) ([]json.RawMessage, error) {
	if !o.Set(k) {
		return nil, nil
	}
	var a []json.RawMessage
	if err := json.Unmarshal(o.m[k], &a); err != nil {
		return nil, o.TypeErr(k, "an array")
	}
	if a == nil {
		a = []json.RawMessage{}
	}
	return a, nil
}

// objects reads an optional array of objects.
func (o Obj) Objects(k string) ([]Obj, error) {
	raw, err := o.Array(k)
	if err != nil || raw == nil {
		return nil, err
	}
	out := make([]Obj, len(raw))
	for i, b := range raw {
		p := fmt.Sprintf("%s[%d]", o.Field(k), i)
		if out[i], err = o.Child(p, b); err != nil {
			return nil, badRequest("field %q must be an object", p)
		}
	}
	return out, nil
}

func (o Obj) Strings(k string) ([]string, error) {
	if !o.Set(k) {
		return nil, nil
	}
	var a []string
	if err := json.Unmarshal(o.m[k], &a); err != nil {
		return nil, o.TypeErr(k, "an array of strings")
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
func (o Obj) MetadataPatch(k string, cur map[string]string, emptyDeletes bool) (map[string]string, error) {
	out := map[string]string{}
	for kk, v := range cur {
		out[kk] = v
	}
	if !o.Has(k) {
		return out, nil
	}
	if o.Null(k) {
		return map[string]string{}, nil
	}
	var patch map[string]*string
	if err := json.Unmarshal(o.m[k], &patch); err != nil {
		return nil, o.TypeErr(k, "an object of string values")
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
			return nil, badRequest("field %q: key %q must be 1 to %d characters", o.Field(k), kk, maxMetadataKeyLen)
		}
		if len(*v) > maxMetadataValLen {
			return nil, badRequest("field %q: value is %d characters; the limit is %d", o.Field(k)+"."+kk, len(*v), maxMetadataValLen)
		}
		out[kk] = *v
	}
	if len(out) > maxMetadataKeys {
		return nil, badRequest("field %q has %d keys; the limit is %d", o.Field(k), len(out), maxMetadataKeys)
	}
	return out, nil
}

// limitLen refuses a string field longer than n characters.
func (o Obj) LimitLen(k, v string, n int) error {
	if len([]rune(v)) > n {
		return badRequest("field %q is %d characters; the limit is %d", o.Field(k), len([]rune(v)), n)
	}
	return nil
}

// MustJSON marshals values agentkernel built itself.
func MustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("managed: marshal %T: %v", v, err))
	}
	return b
}

// jsonUnmarshal decodes stored JSON; empty means "leave v as is".
func jsonUnmarshal(b []byte, v any) error {
	if len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, v)
}
