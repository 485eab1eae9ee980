package journal

import (
	"encoding/json"
	"errors"
	"regexp"
	"testing"
)

// guestOpID is the form the guest accepts for exec op ids.
var guestOpID = regexp.MustCompile(`^op_[0-9a-f]{16,64}$`)

func mustOpID(t *testing.T, kind string, args any, turn, step, index int64) string {
	t.Helper()
	id, err := OpID(kind, args, turn, step, index)
	if err != nil {
		t.Fatalf("OpID(%s, %v, %d, %d, %d): %v", kind, args, turn, step, index, err)
	}
	if !guestOpID.MatchString(id) {
		t.Fatalf("OpID = %q, not of the form op_<hex>", id)
	}
	return id
}

// TestOpIDSameOp: key order and spacing of the args, or how they are
// built, do not make a different op.
func TestOpIDSameOp(t *testing.T) {
	base := mustOpID(t, KindToolExec, json.RawMessage(`{"command":"echo x >> /workspace/log","timeout_ms":5000}`), 3, 1, 0)
	for name, args := range map[string]any{
		"keys reordered": json.RawMessage(`{"timeout_ms":5000,"command":"echo x >> /workspace/log"}`),
		"spaced":         json.RawMessage("{ \"command\" : \"echo x >> /workspace/log\",\n\t\"timeout_ms\" : 5000 }"),
		"a Go map":       map[string]any{"timeout_ms": 5000, "command": "echo x >> /workspace/log"},
		"a Go struct": struct {
			T int    `json:"timeout_ms"`
			C string `json:"command"`
		}{5000, "echo x >> /workspace/log"},
	} {
		if got := mustOpID(t, KindToolExec, args, 3, 1, 0); got != base {
			t.Errorf("%s: OpID = %s, want %s", name, got, base)
		}
	}
}

// TestOpIDDifferentOps: every component of the id matters.
func TestOpIDDifferentOps(t *testing.T) {
	args := json.RawMessage(`{"command":"ls"}`)
	seen := map[string]string{}
	for name, id := range map[string]string{
		"base":             mustOpID(t, KindToolExec, args, 1, 2, 3),
		"other args":       mustOpID(t, KindToolExec, json.RawMessage(`{"command":"ls "}`), 1, 2, 3),
		"other arg type":   mustOpID(t, KindToolExec, json.RawMessage(`{"command":["ls"]}`), 1, 2, 3),
		"other kind":       mustOpID(t, KindOutboundCall, args, 1, 2, 3),
		"other turn":       mustOpID(t, KindToolExec, args, 2, 2, 3),
		"other step":       mustOpID(t, KindToolExec, args, 1, 3, 3),
		"other index":      mustOpID(t, KindToolExec, args, 1, 2, 4),
		"position swapped": mustOpID(t, KindToolExec, args, 3, 2, 1),
		"no args":          mustOpID(t, KindToolExec, nil, 1, 2, 3),
	} {
		if prev, dup := seen[id]; dup {
			t.Errorf("%s and %s share op id %s", name, prev, id)
		}
		seen[id] = name
	}
	// Stable across calls (and processes: nothing random goes in).
	if a, b := mustOpID(t, KindModelRequest, args, 1, 0, 0), mustOpID(t, KindModelRequest, args, 1, 0, 0); a != b {
		t.Fatalf("OpID not deterministic: %s vs %s", a, b)
	}
}

func TestOpIDRejects(t *testing.T) {
	if _, err := OpID("file_delete", nil, 1, 0, 0); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("unknown kind: err = %v, want ErrUnknownKind", err)
	}
	if _, err := OpID(KindToolExec, nil, 1, -1, 0); err == nil {
		t.Error("negative step: want an error")
	}
	if _, err := OpID(KindToolExec, json.RawMessage(`{`), 1, 0, 0); err == nil {
		t.Error("bad args JSON: want an error")
	}
}
