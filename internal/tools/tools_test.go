package tools

import (
	"encoding/json"
	"testing"
)

func TestParseDefaultsAllowAll(t *testing.T) {
	c, err := Parse(json.RawMessage(`[{"type":"agent_toolset_20260401"},{"type":"custom","name":"get_weather","description":"w","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tools) != 7 {
		t.Fatalf("tools = %d", len(c.Tools))
	}
	for _, n := range Names {
		if c.Kind(n) != KindBuiltin || c.Asks(n) {
			t.Fatalf("%s: kind %d asks %v", n, c.Kind(n), c.Asks(n))
		}
	}
	if c.Kind("get_weather") != KindCustom || c.Kind("nope") != KindUnknown {
		t.Fatal("kinds")
	}
	var schema map[string]any
	if err := json.Unmarshal(c.Tools[0].InputSchema, &schema); err != nil || schema["properties"] == nil {
		t.Fatalf("bash schema %s", c.Tools[0].InputSchema)
	}
}

func TestParsePoliciesAndDisabled(t *testing.T) {
	c, err := Parse(json.RawMessage(`[{"type":"agent_toolset_20260401",
		"default_config":{"permission_policy":{"type":"always_ask"}},
		"configs":[{"name":"read","permission_policy":{"type":"always_allow"}},{"name":"grep","enabled":false}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Asks("bash") || c.Asks("read") || c.Kind("grep") != KindUnknown || len(c.Tools) != 5 {
		t.Fatalf("bash asks %v, read asks %v, grep kind %d, %d tools", c.Asks("bash"), c.Asks("read"), c.Kind("grep"), len(c.Tools))
	}
	if c, err := Parse(nil); err != nil || len(c.Tools) != 0 {
		t.Fatal("no tools")
	}
}
