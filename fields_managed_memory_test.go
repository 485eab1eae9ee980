package agentkernel_test

import (
	"reflect"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// TestEveryMemoryFieldWorksOrIsRefused is TestEveryManagedFieldWorksOrIsRefused
// for the memory store and memory bodies: every field of the SDK's params
// is sent alone (with what its body requires) and must show its effect in
// the answer and a later GET, or be refused naming it.
func TestEveryMemoryFieldWorksOrIsRefused(t *testing.T) {
	w := &memoryWalker{managedWalker: &managedWalker{}}
	w.d = daemontest.Start(t)
	bodies := []walkBody{
		{"store.create", anthropic.BetaMemoryStoreNewParams{}},
		{"store.update", anthropic.BetaMemoryStoreUpdateParams{}},
		{"memory.create", anthropic.BetaMemoryStoreMemoryNewParams{}},
		{"memory.update", anthropic.BetaMemoryStoreMemoryUpdateParams{}},
	}
	rules := w.rules()
	n := walkBodies(t, rules, bodies, w.newCase)
	if n == 0 {
		t.Fatal("no field walked")
	}
	t.Logf("%d fields checked", n)
}

type memoryWalker struct{ *managedWalker }

func (w *memoryWalker) newCase(t *testing.T, body string, typ reflect.Type, l leaf, r fieldRule) *fieldCase {
	c := &fieldCase{body: body, leaf: l, marker: w.marker(), state: map[string]any{}}
	storeID := w.post(t, "/v1/memory_stores", map[string]any{"name": "walk"})["id"].(string)
	var (
		base map[string]any
		path string
	)
	switch body {
	case "store.create":
		base, path = map[string]any{"name": "walk"}, "/v1/memory_stores"
	case "store.update":
		base, path = map[string]any{}, "/v1/memory_stores/"+storeID
	case "memory.create":
		base, path = map[string]any{"path": "/" + c.marker + ".md", "content": "c"}, "/v1/memory_stores/"+storeID+"/memories"
	case "memory.update":
		m := w.post(t, "/v1/memory_stores/"+storeID+"/memories", map[string]any{"path": "/" + c.marker + ".md", "content": "before"})
		c.state["memory"] = m["id"]
		base, path = map[string]any{}, "/v1/memory_stores/"+storeID+"/memories/"+m["id"].(string)
	}
	c.state["store"] = storeID
	c.value = r.valueFor(t, c)
	fill := func(p string) (any, bool) {
		if p == ".precondition.type" {
			return "content_sha256", true
		}
		return nil, false
	}
	c.send = func() (int, map[string]any) {
		for k, v := range synth(t, typ, l.steps, c.value, fill).(map[string]any) {
			base[k] = v
		}
		if body[:7] == "memory." {
			path += "?view=full"
		}
		return w.do(t, "POST", path, base)
	}
	return c
}

// echoesAt checks that the answer and a later GET hold the case's value.
func (w *memoryWalker) echoesAt(at string) func(*testing.T, *fieldCase) {
	return func(t *testing.T, c *fieldCase) {
		out := ok(t, c)
		if out == nil {
			return
		}
		get := "/v1/memory_stores/" + out["id"].(string)
		if out["type"] == "memory" {
			get = "/v1/memory_stores/" + c.state["store"].(string) + "/memories/" + out["id"].(string)
		}
		_, again := w.do(t, "GET", get, nil)
		for _, o := range []map[string]any{out, again} {
			holds(t, c, at, jsonAt(o, at), c.value)
		}
	}
}

func (w *memoryWalker) rules() []fieldRule {
	memPath := func(t *testing.T, c *fieldCase) any { return "/walk/" + c.marker + ".md" }
	return []fieldRule{
		rule(`^store\.(create|update) \.name$`).does(w.echoesAt(".name")),
		rule(`^store\.(create|update) \.description$`).does(w.echoesAt(".description")),
		rule(`^store\.(create|update) \.metadata$`).does(w.echoesAt(".metadata")),
		rule(`^memory\.(create|update) \.path$`).with(memPath).does(w.echoesAt(".path")),
		rule(`^memory\.(create|update) \.content$`).does(w.echoesAt(".content")),
		// A precondition holding the memory's current digest lets the
		// update through (a stale one is a 409: TestMemoryStoresThroughTheSDK).
		rule(`^memory\.update \.precondition\.content_sha256$`).with(sha("before")).does(func(t *testing.T, c *fieldCase) {
			if out := ok(t, c); out != nil && out["content_sha256"] != sha("before") {
				t.Errorf("precondition alone changed the memory: %v", out)
			}
		}),
		rule(`^memory\.update \.precondition\.type$`).with("etag").refuse("precondition.type"),
	}
}
