package tools

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

func TestMCPNamesAreValidAndDistinct(t *testing.T) {
	valid := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)
	pairs := [][2]string{
		{"github", "create_issue"}, {"a__b", "c"}, {"a", "b__c"}, {"a.b", "c"}, {"a_b", "c"},
		{"a", "b.c"}, {"a", "b_c"}, {"_a", "b"}, {"a_", "_b"}, {"a", "__b"},
		{strings.Repeat("s", 200), "t"}, {strings.Repeat("s", 200), "u"}, {"ünï", "tool"}, {"x y", "z"},
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		n := MCPName(p[0], p[1])
		if !valid.MatchString(n) {
			t.Errorf("MCPName%q = %q: not a valid Messages API tool name", p, n)
		}
		if prev, ok := seen[n]; ok {
			t.Errorf("MCPName%q = MCPName%q = %q", p, prev, n)
		}
		seen[n] = p
	}
	if got := MCPName("github", "create_issue"); got != "mcp__github__create_issue" {
		t.Errorf("plain name %q", got)
	}
}

func TestWithMCPAppliesTheToolsetConfig(t *testing.T) {
	raw := json.RawMessage(`[{"type":"custom","name":"mcp__srv__taken","input_schema":{"type":"object"}},
		{"type":"mcp_toolset","mcp_server_name":"srv","default_config":{"permission_policy":{"type":"always_allow"}},
		 "configs":[{"name":"off","enabled":false},{"name":"asky","permission_policy":{"type":"always_ask"}}]},
		{"type":"mcp_toolset","mcp_server_name":"other"}]`)
	c, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	out, skipped := c.WithMCP(map[string][]MCPTool{
		"srv":   {{Name: "echo"}, {Name: "off"}, {Name: "asky"}, {Name: "taken"}},
		"other": {{Name: "echo"}},
	})
	var names []string
	for _, tl := range out.Tools {
		names = append(names, tl.Name)
	}
	want := "mcp__srv__taken,mcp__srv__echo,mcp__srv__asky,mcp__other__echo"
	if strings.Join(names, ",") != want {
		t.Fatalf("tools %v, want %s", names, want)
	}
	if len(skipped) != 1 || skipped[0] != "srv/taken" {
		t.Fatalf("skipped %v", skipped)
	}
	if out.Asks("mcp__srv__echo") || !out.Asks("mcp__srv__asky") || !out.Asks("mcp__other__echo") {
		t.Fatal("policies: srv default always_allow, asky always_ask, other's default always_ask")
	}
	if r, ok := out.MCP("mcp__other__echo"); !ok || r.Server != "other" || r.Tool != "echo" || out.Kind("mcp__other__echo") != KindMCP {
		t.Fatalf("ref %+v %v", r, ok)
	}
	if c.Kind("mcp__srv__echo") != KindUnknown || len(c.Tools) != 1 {
		t.Fatal("WithMCP changed the agent's own config")
	}
}
