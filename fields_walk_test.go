package agentkernel_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The field walker: every field of a request body type, found by
// reflection, as a path of steps; and a JSON body that sets exactly one of
// them. TestEveryManagedFieldWorksOrIsRefused and
// TestEveryRequestFieldWorksOrIsRefused use it on anthropic-sdk-go's param
// types and on agentkernel's own request types, so a field added to either
// fails them until someone says what it does.

// step is one step of a field path: a JSON field, an array element, or a
// variant of an SDK union (named by its Go field, e.g. OfAgentToolset20260401).
type step struct {
	kind byte // 'f' field, 'e' element, 'v' variant
	name string
}

// leaf is one field of a body type: its path and its Go type.
type leaf struct {
	path  string
	steps []step
	typ   reflect.Type
}

func (l leaf) String() string { return l.path }

// pathString renders steps: .tools[]<OfAgentToolset20260401>.configs[]<OfBash>.enabled
func pathString(steps []step) string {
	var b strings.Builder
	for _, s := range steps {
		switch s.kind {
		case 'f':
			b.WriteString("." + s.name)
		case 'e':
			b.WriteString("[]")
		case 'v':
			b.WriteString("<" + s.name + ">")
		}
	}
	return b.String()
}

var (
	rawMessageType = reflect.TypeOf(json.RawMessage(nil))
	timeType       = reflect.TypeOf(time.Time{})
)

// isOpt reports the SDK's param.Opt[T] (a struct with a Value field).
func isOpt(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && strings.HasPrefix(t.Name(), "Opt[") && strings.HasSuffix(t.PkgPath(), "/packages/param")
}

// isUnion reports an SDK union: a struct whose fields are inline variants.
func isUnion(t reflect.Type) bool {
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := 0; i < t.NumField(); i++ {
		if strings.Contains(t.Field(i).Tag.Get("json"), "inline") {
			return true
		}
	}
	return false
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// jsonFields are the fields of a struct that go on the wire, with their
// JSON names.
func jsonFields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" || f.Anonymous {
			continue
		}
		out = append(out, f)
	}
	return out
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}

// walkFields lists every leaf field of t.
func walkFields(t reflect.Type) []leaf {
	var out []leaf
	var walk func(t reflect.Type, steps []step, seen map[reflect.Type]bool)
	walk = func(t reflect.Type, steps []step, seen map[reflect.Type]bool) {
		t = deref(t)
		if isOpt(t) {
			t = t.Field(0).Type
		}
		switch {
		case t == rawMessageType, t == timeType, t.Kind() == reflect.Map, t.Kind() == reflect.Interface:
		case t.Kind() == reflect.Slice:
			walk(t.Elem(), append(slicesClone(steps), step{kind: 'e'}), seen)
			return
		case t.Kind() == reflect.Struct:
			if seen[t] {
				out = append(out, leaf{path: pathString(steps) + " (recursive)", steps: steps, typ: t})
				return
			}
			seen[t] = true
			defer delete(seen, t)
			if isUnion(t) {
				for i := 0; i < t.NumField(); i++ {
					if f := t.Field(i); strings.Contains(f.Tag.Get("json"), "inline") {
						walk(f.Type, append(slicesClone(steps), step{kind: 'v', name: f.Name}), seen)
					}
				}
				return
			}
			for _, f := range jsonFields(t) {
				walk(f.Type, append(slicesClone(steps), step{kind: 'f', name: jsonName(f)}), seen)
			}
			return
		}
		out = append(out, leaf{path: pathString(steps), steps: steps, typ: t})
	}
	walk(t, nil, map[reflect.Type]bool{})
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

func slicesClone(s []step) []step { return append([]step(nil), s...) }

// sdkEnums maps each string enum type of anthropic-sdk-go to its values, in
// declaration order, read from the SDK's source (Go has no reflection over
// constants).
var sdkEnums = sync.OnceValues(func() (map[string][]string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/anthropics/anthropic-sdk-go").Output()
	if err != nil {
		return nil, fmt.Errorf("go list the SDK: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	enums := map[string][]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range af.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, sp := range g.Specs {
				vs := sp.(*ast.ValueSpec)
				id, ok := vs.Type.(*ast.Ident)
				if !ok || len(vs.Values) != 1 {
					continue
				}
				if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, _ := strconv.Unquote(lit.Value)
					enums[id.Name] = append(enums[id.Name], v)
				}
			}
		}
	}
	return enums, nil
})

// constValue is the value of an SDK constant type (constant.Bash → "bash").
func constValue(t reflect.Type) (string, bool) {
	if t.Kind() != reflect.String || !strings.HasSuffix(t.PkgPath(), "/shared/constant") {
		return "", false
	}
	m := reflect.New(t).Elem().MethodByName("Default")
	if !m.IsValid() {
		return "", false
	}
	return m.Call(nil)[0].String(), true
}

// enumValues are the values an SDK string type takes (nil if it is free).
func enumValues(t *testing.T, typ reflect.Type) []string {
	if v, ok := constValue(typ); ok {
		return []string{v}
	}
	if typ.Kind() != reflect.String || !strings.HasPrefix(typ.PkgPath(), "github.com/anthropics/anthropic-sdk-go") {
		return nil
	}
	enums, err := sdkEnums()
	if err != nil {
		t.Fatal(err)
	}
	return enums[typ.Name()]
}

// synth builds the JSON for type typ that sets the field at steps to val,
// with each object's discriminators (its "type" and constant fields) and
// the required fields fill gives filled in, so the body is what a client
// would send to set that one field.
func synth(t *testing.T, typ reflect.Type, steps []step, val any, fill func(path string) (any, bool)) any {
	var build func(typ reflect.Type, done, rest []step) any
	build = func(typ reflect.Type, done, rest []step) any {
		typ = deref(typ)
		if isOpt(typ) {
			typ = typ.Field(0).Type
		}
		if len(rest) == 0 {
			return val
		}
		s := rest[0]
		switch {
		case s.kind == 'e':
			return []any{build(typ.Elem(), append(slicesClone(done), s), rest[1:])}
		case s.kind == 'v':
			f, ok := typ.FieldByName(s.name)
			if !ok {
				t.Fatalf("no variant %s in %v", s.name, typ)
			}
			return build(f.Type, append(slicesClone(done), s), rest[1:])
		}
		obj := map[string]any{}
		for _, f := range jsonFields(typ) {
			name := jsonName(f)
			p := pathString(append(slicesClone(done), step{kind: 'f', name: name}))
			if v, ok := fill(p); ok {
				obj[name] = v
				continue
			}
			ft := deref(f.Type)
			vals := enumValues(t, ft)
			required := f.Tag.Get("api") == "required"
			_, isConst := constValue(ft)
			if len(vals) == 1 && (isConst || name == "type" || required) {
				obj[name] = vals[0]
			} else if required && ft.Kind() == reflect.Struct && !isOpt(ft) && !isUnion(ft) {
				obj[name] = build(ft, append(slicesClone(done), step{kind: 'f', name: name}), []step{{kind: 'f', name: "\x00"}})
			}
		}
		if s.name != "\x00" { // "\x00": only the object's own required fields
			f := fieldByJSON(typ, s.name)
			obj[s.name] = build(f.Type, append(slicesClone(done), s), rest[1:])
		}
		return obj
	}
	return build(typ, nil, steps)
}

func fieldByJSON(typ reflect.Type, name string) reflect.StructField {
	for _, f := range jsonFields(typ) {
		if jsonName(f) == name {
			return f
		}
	}
	panic(fmt.Sprintf("no field %q in %v", name, typ))
}

// nonDefault is the value the walker sends for a leaf unless a rule says
// otherwise: for an enum, its last value (the first is usually the
// default), for a free string a marker unique to the case.
func nonDefault(t *testing.T, l leaf, marker string) any {
	typ := l.typ
	if vals := enumValues(t, typ); len(vals) > 0 {
		return vals[len(vals)-1]
	}
	switch {
	case typ == rawMessageType:
		return map[string]any{"walk": marker}
	case typ == timeType:
		return time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
	}
	switch typ.Kind() {
	case reflect.String:
		return marker
	case reflect.Bool:
		return true
	case reflect.Int, reflect.Int64, reflect.Int32:
		return 2
	case reflect.Float64, reflect.Float32:
		return 1.5
	case reflect.Map:
		if typ.Elem().Kind() == reflect.String {
			return map[string]string{"walk": marker}
		}
		return map[string]any{"walk_" + marker: map[string]any{"type": "string"}}
	case reflect.Interface:
		return map[string]any{"walk": marker}
	}
	t.Fatalf("%s: no non-default value for %v", l.path, typ)
	return nil
}

// fieldRule says what one field (or a family of fields) does: matched by
// a regexp on "<body> <path>", it either expects a refusal naming the
// field or runs a check of the field's effect.
type fieldRule struct {
	re *regexp.Regexp
	// value overrides the leaf's value (a func gets the case).
	value any
	// refused: the request must be a 400 whose message contains this.
	refused string
	// check verifies the field's effect; it sends the request itself.
	check func(t *testing.T, c *fieldCase)
}

func rule(re string) fieldRule { return fieldRule{re: regexp.MustCompile(re)} }

func (r fieldRule) refuse(mention string) fieldRule { r.refused = mention; return r }
func (r fieldRule) with(v any) fieldRule            { r.value = v; return r }
func (r fieldRule) does(f func(*testing.T, *fieldCase)) fieldRule {
	r.check = f
	return r
}

// valueFor is the value a case sends: the rule's (a func may set up what
// the value refers to), else a non-default one.
func (r fieldRule) valueFor(t *testing.T, c *fieldCase) any {
	switch v := r.value.(type) {
	case nil:
		return nonDefault(t, c.leaf, c.marker)
	case func(*testing.T, *fieldCase) any:
		return v(t, c)
	}
	return r.value
}

// holds checks that got (a decoded JSON value) holds want: every key of a
// map, else the same value.
func holds(t *testing.T, c *fieldCase, where string, got, want any) {
	t.Helper()
	if m, isMap := want.(map[string]string); isMap {
		for k, v := range m {
			if jsonAt(got, "."+k) != v {
				t.Errorf("%s %s: %s is %v, want it to hold %s=%s", c.body, c.leaf.path, where, got, k, v)
			}
		}
		return
	}
	if !sameJSON(got, want) && fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s %s: %s is %v, want %v", c.body, c.leaf.path, where, got, want)
	}
}

// fieldCase is one field of one body being tried.
type fieldCase struct {
	body   string // e.g. "agent.create"
	leaf   leaf
	value  any
	marker string
	// send sends the body setting only this field and returns the status
	// and decoded answer.
	send func() (int, map[string]any)
	// state a body's sender and checks share (ids of what was created).
	state map[string]any
}

// classify finds the rule of a case ("" body matches any).
func classify(rules []fieldRule, body string, l leaf) (fieldRule, bool) {
	key := body + " " + l.path
	for _, r := range rules {
		if r.re.MatchString(key) {
			return r, true
		}
	}
	return fieldRule{}, false
}

// expectRefused checks a 400 that names what it refuses.
func expectRefused(t *testing.T, c *fieldCase, mention string) {
	t.Helper()
	code, body := c.send()
	typ, msg := errType(body)
	if code != 400 || typ != "invalid_request_error" || !strings.Contains(msg, mention) {
		t.Errorf("%s %s = %v: got %d %q, want a 400 naming %q", c.body, c.leaf.path, c.value, code, msg, mention)
	}
}

// jsonAt reads a dotted path (with [i] indexes) out of a decoded answer.
func jsonAt(v any, path string) any {
	for _, part := range strings.Split(strings.TrimPrefix(path, "."), ".") {
		name, idx, hasIdx := strings.Cut(part, "[")
		if name != "" {
			m, _ := v.(map[string]any)
			v = m[name]
		}
		if hasIdx {
			i, _ := strconv.Atoi(strings.TrimSuffix(idx, "]"))
			a, _ := v.([]any)
			if i >= len(a) {
				return nil
			}
			v = a[i]
		}
	}
	return v
}

// sameJSON compares values through their JSON.
func sameJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
