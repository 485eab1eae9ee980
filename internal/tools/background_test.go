package tools

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestBashSchemaOffersRunInBackground(t *testing.T) {
	c, err := Parse(json.RawMessage(`[{"type":"agent_toolset_20260401"}]`))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(c.Tools[0].InputSchema, &schema); err != nil || schema.Properties["run_in_background"] == nil || schema.Properties["command"] == nil {
		t.Fatalf("bash schema %s", c.Tools[0].InputSchema)
	}
}

func TestBackgroundOnlyForBashWithTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     bool
	}{
		{"bash", `{"command":"sleep 60","run_in_background":true}`, true},
		{"bash", `{"command":"sleep 60"}`, false},
		{"bash", `{"command":"  ","run_in_background":true}`, false},
		{"read", `{"command":"x","run_in_background":true}`, false},
	} {
		cmd, ok := Background(tc.name, json.RawMessage(tc.in))
		if ok != tc.want || (ok && cmd != "sleep 60") {
			t.Errorf("%s %s: got %q %v", tc.name, tc.in, cmd, ok)
		}
	}
	if m := markedShell("op_ab", "x"); !strings.HasPrefix(m, ": op_ab;") {
		t.Fatalf("mark %q", m)
	}
}
