package postgres

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestSandboxContract runs the SandboxStore contract until the lead folds it
// into storetest.Exercise; every subtest gets its own fresh schema.
func TestSandboxContract(t *testing.T) {
	testURL(t)
	storetest.ExerciseSandboxes(context.Background(), t, func(t *testing.T) store.SandboxStore {
		return openTest(t)
	})
}

// TestSandboxJSONRoundTripsByteForByte: json (not jsonb) columns keep a
// driver's handle and the limits exactly as written, key order and spacing
// included, so a driver may compare or hash its own handle.
func TestSandboxJSONRoundTripsByteForByte(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	handle := json.RawMessage(`{"z": 1,  "a": [2, 1], "pid":4242}`)
	limits := json.RawMessage(`{ "pids": 64, "memory_mb": 512 }`)
	stats := json.RawMessage(`{"files": 3,"bytes":  10}`)
	if _, err := s.CreateSandbox(ctx, &store.Sandbox{ID: "sbx_json", Handle: handle, Limits: limits}); err != nil {
		t.Fatal(err)
	}
	sb, err := s.GetSandbox(ctx, "sbx_json")
	if err != nil {
		t.Fatal(err)
	}
	if string(sb.Handle) != string(handle) || string(sb.Limits) != string(limits) {
		t.Fatalf("read back handle %s limits %s, want %s and %s", sb.Handle, sb.Limits, handle, limits)
	}
	if _, err := s.CreateBackup(ctx, &store.Backup{ID: "bkp_json", Stats: stats, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	b, err := s.GetBackup(ctx, "bkp_json")
	if err != nil {
		t.Fatal(err)
	}
	if string(b.Stats) != string(stats) {
		t.Fatalf("read back stats %s, want %s", b.Stats, stats)
	}
}

// BenchmarkSandboxUpdates: AGENTKERNEL_TEST_POSTGRES_URL=… go test ./internal/store/postgres -run '^$' -bench SandboxUpdates
func BenchmarkSandboxUpdates(b *testing.B) {
	storetest.BenchmarkSandboxUpdates(b, func(tb testing.TB) store.SandboxStore { return openTest(tb) })
}
