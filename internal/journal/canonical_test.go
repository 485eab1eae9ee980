package journal

import (
	"encoding/json"
	"testing"
)

func TestCanonical(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   any
		want string
	}{
		{"sorted keys, no spaces", json.RawMessage(` { "b" : 1 , "a" : [ 1, 2 , {"d":null, "c":true} ] } `),
			`{"a":[1,2,{"c":true,"d":null}],"b":1}`},
		{"go map", map[string]any{"z": "x", "a": 1.5, "m": map[string]int{"y": 1, "b": 2}},
			`{"a":1.5,"m":{"b":2,"y":1},"z":"x"}`},
		{"go struct uses its JSON names, sorted", struct {
			Command string `json:"command"`
			Timeout int    `json:"timeout_ms"`
			Bg      bool   `json:"background"`
		}{"ls -la", 5000, false}, `{"background":false,"command":"ls -la","timeout_ms":5000}`},
		{"numbers kept as written", json.RawMessage(`[1, 1.0, 1e3, -0, 12345678901234567890]`),
			`[1,1.0,1e3,-0,12345678901234567890]`},
		{"strings escaped once", json.RawMessage(`{"s":"tab\tquote\"uni\u00e9 <b>"}`),
			`{"s":"tab\tquote\"unié \u003cb\u003e"}`},
		{"nil", nil, `null`},
		{"scalar", "echo hi", `"echo hi"`},
		{"empty object and array", json.RawMessage(`{ "a" : { }, "b" : [ ] }`), `{"a":{},"b":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonical(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("Canonical = %s, want %s", got, tc.want)
			}
			// Canonical JSON is a fixed point.
			again, err := Canonical(json.RawMessage(got))
			if err != nil || string(again) != string(got) {
				t.Fatalf("Canonical of canonical = %s, %v; want %s", again, err, got)
			}
		})
	}
}

func TestCanonicalRejects(t *testing.T) {
	for name, in := range map[string]any{
		"bad raw JSON": json.RawMessage(`{"a":`),
		"channel":      make(chan int),
	} {
		if got, err := Canonical(in); err == nil {
			t.Errorf("%s: Canonical = %s, want an error", name, got)
		}
	}
}
