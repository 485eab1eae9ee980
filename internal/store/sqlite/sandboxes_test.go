package sqlite

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestSandboxContract runs the SandboxStore contract on every compiled-in
// driver until the lead folds it into storetest.Exercise; every subtest
// gets its own fresh database.
func TestSandboxContract(t *testing.T) {
	for _, d := range Drivers() {
		t.Run(d, func(t *testing.T) {
			storetest.ExerciseSandboxes(context.Background(), t, func(t *testing.T) store.SandboxStore {
				return openTemp(t, WithDriver(d))
			})
		})
	}
}

// TestSandboxJSONRoundTripsByteForByte: JSON is TEXT, so a driver's handle,
// the limits and backup stats read back exactly as written, key order and
// spacing included (as the Postgres engine's json columns keep them).
func TestSandboxJSONRoundTripsByteForByte(t *testing.T) {
	s := openTemp(t)
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
	if _, err := s.CreateBackup(ctx, &store.Backup{ID: "bkp_json", Stats: stats, ExpiresAt: time.Unix(2e9, 0)}); err != nil {
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

// TestSandboxTimesKeepMicroseconds: times given with nanoseconds are kept
// to the microsecond, like every other time in the schema, and what a write
// returns equals what a later read returns.
func TestSandboxTimesKeepMicroseconds(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	at := time.Date(2031, 3, 4, 5, 6, 7, 123456789, time.FixedZone("UTC-7", -7*3600))
	want := at.Truncate(time.Microsecond)
	created, err := s.CreateSandbox(ctx, &store.Sandbox{ID: "sbx_ns", CreatedAt: at, StartedAt: &at})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSandbox(ctx, "sbx_ns")
	if err != nil {
		t.Fatal(err)
	}
	for what, v := range map[string]time.Time{
		"created CreatedAt": created.CreatedAt, "read CreatedAt": got.CreatedAt,
		"read LastActivityAt": got.LastActivityAt, "read StartedAt": *got.StartedAt,
	} {
		if !v.Equal(want) {
			t.Errorf("%s = %v, want %v", what, v, want)
		}
	}
	var stored int64
	if err := s.read.QueryRowContext(ctx, `SELECT created_at FROM sandboxes WHERE id = 'sbx_ns'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != at.UnixMicro() {
		t.Fatalf("created_at column = %d, want unix microseconds %d", stored, at.UnixMicro())
	}
}

// BenchmarkSandboxUpdates: go test ./internal/store/sqlite -run '^$' -bench SandboxUpdates
func BenchmarkSandboxUpdates(b *testing.B) {
	storetest.BenchmarkSandboxUpdates(b, func(tb testing.TB) store.SandboxStore { return openTemp(tb) })
}
