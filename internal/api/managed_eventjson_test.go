package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

func TestEventJSONFillsOnlyMissingTopLevelFields(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name, data string
		want       map[string]any
	}{
		{"complete is kept byte for byte", `{"id":"sevt_own","type":"agent.message","processed_at":"2025-01-01T00:00:00Z"}`,
			map[string]any{"id": "sevt_own", "type": "agent.message", "processed_at": "2025-01-01T00:00:00Z"}},
		{"nested id does not count", `{"type":"agent.tool_use","input":{"id":"nested","processed_at":1}, "name":"bash"}`,
			map[string]any{"id": "sevt_1", "type": "agent.tool_use", "processed_at": "2026-01-02T03:04:05Z", "name": "bash", "input": map[string]any{"id": "nested", "processed_at": 1.0}}},
		{"string values that look like keys", `{"text":"\"id\": x, {\"type\"","type":"agent.message"}`,
			map[string]any{"id": "sevt_1", "type": "agent.message", "processed_at": "2026-01-02T03:04:05Z", "text": `"id": x, {"type"`}},
		{"empty object", `{}`, map[string]any{"id": "sevt_1", "type": "agent.message", "processed_at": "2026-01-02T03:04:05Z"}},
		{"not an object", `[1]`, map[string]any{"id": "sevt_1", "type": "agent.message", "processed_at": "2026-01-02T03:04:05Z"}},
	} {
		out := EventJSON(store.SessionEvent{ID: "sevt_1", Type: "agent.message", Data: json.RawMessage(c.data), CreatedAt: at})
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %s is not JSON: %v", c.name, out, err)
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(c.want)
		if string(g) != string(w) {
			t.Errorf("%s: got %s, want %s", c.name, g, w)
		}
	}
}
