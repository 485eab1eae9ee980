package storetest

import (
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

func (e *sbEnv) backup(b store.Backup) *store.Backup {
	e.t.Helper()
	if b.ID == "" {
		b.ID = e.nextID("bkp")
	}
	out, err := e.s.CreateBackup(e.ctx, &b)
	if err != nil {
		e.t.Fatalf("CreateBackup(%q): %v", b.ID, err)
	}
	return out
}

func (e *sbEnv) listBackupIDs(sandboxID string) []string {
	e.t.Helper()
	bs, err := e.s.ListBackups(e.ctx, sandboxID)
	if err != nil {
		e.t.Fatalf("ListBackups(%q): %v", sandboxID, err)
	}
	return sbBackupIDs(bs)
}

func sbBackupIDs(bs []*store.Backup) []string {
	out := []string{}
	for _, b := range bs {
		out = append(out, b.ID)
	}
	return out
}

func sameBackup(t *testing.T, what string, got, want *store.Backup) {
	t.Helper()
	equal(t, what+" ID", got.ID, want.ID)
	equal(t, what+" TenantID", got.TenantID, want.TenantID)
	equal(t, what+" Environment", got.Environment, want.Environment)
	equal(t, what+" SessionKey", got.SessionKey, want.SessionKey)
	equal(t, what+" SandboxID", got.SandboxID, want.SandboxID)
	equal(t, what+" BlobKey", got.BlobKey, want.BlobKey)
	equal(t, what+" Size", got.Size, want.Size)
	equal(t, what+" SHA256", got.SHA256, want.SHA256)
	sbSameJSON(t, what+" Stats", got.Stats, want.Stats)
	equal(t, what+" Generation", got.Generation, want.Generation)
	sbSameTime(t, what+" CreatedAt", got.CreatedAt, want.CreatedAt)
	sbSameTime(t, what+" ExpiresAt", got.ExpiresAt, want.ExpiresAt)
}

var backupCases = []sandboxCase{
	{"CreateGetRoundTrip", testBackupRoundTrip},
	{"CreateDuplicateAndInvalid", testBackupBadPaths},
	{"LatestNewestUnexpiredForExactKey", testLatestBackup},
	{"ListNewestFirst", testListBackups},
	{"DeleteExpired", testDeleteExpiredBackups},
}

func fullBackup(id string) store.Backup {
	return store.Backup{ID: id, TenantID: "tnt_a", Environment: "env_1", SessionKey: "sess_1",
		SandboxID: "sbx_1", BlobKey: "backups/tnt_a/" + id + ".tar.zst", Size: 1 << 33,
		SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Stats:  json.RawMessage(`{"files":12,"dirs":3,"bytes":4096}`), Generation: 5,
		CreatedAt: sbAt(time.Minute), ExpiresAt: sbAt(7 * 24 * time.Hour)}
}

func testBackupRoundTrip(e *sbEnv) {
	in := fullBackup("bkp_full")
	out, err := e.s.CreateBackup(e.ctx, &in)
	mustOK(e.t, err, "CreateBackup")
	want := fullBackup("bkp_full")
	sameBackup(e.t, "created", out, &want)
	got, err := e.s.GetBackup(e.ctx, "bkp_full")
	mustOK(e.t, err, "GetBackup")
	sameBackup(e.t, "read back", got, &want)

	// The store fills in the id and creation time, and keeps no Stats as nil.
	bare, err := e.s.CreateBackup(e.ctx, &store.Backup{TenantID: "tnt_a", ExpiresAt: sbAt(time.Hour)})
	mustOK(e.t, err, "CreateBackup with defaults")
	if bare.ID == "" || bare.CreatedAt.IsZero() {
		e.t.Fatalf("CreateBackup did not fill in ID and CreatedAt: %+v", bare)
	}
	got, err = e.s.GetBackup(e.ctx, bare.ID)
	mustOK(e.t, err, "GetBackup")
	sameBackup(e.t, "defaults read back", got, bare)
	if got.Stats != nil {
		e.t.Fatalf("unset Stats read back as %q, want nil", got.Stats)
	}
}

func testBackupBadPaths(e *sbEnv) {
	first := e.backup(fullBackup("bkp_dup"))
	other := fullBackup("bkp_dup")
	other.BlobKey = "other"
	_, err := e.s.CreateBackup(e.ctx, &other)
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CreateBackup with a taken id")
	got, err := e.s.GetBackup(e.ctx, "bkp_dup")
	mustOK(e.t, err, "GetBackup")
	sameBackup(e.t, "backup after the failed create", got, first)

	_, err = e.s.GetBackup(e.ctx, "bkp_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetBackup(unknown)")

	noTTL := fullBackup("bkp_nottl")
	noTTL.ExpiresAt = time.Time{}
	_, err = e.s.CreateBackup(e.ctx, &noTTL)
	mustErrIs(e.t, err, store.ErrInvalid, "CreateBackup without ExpiresAt")
	badStats := fullBackup("bkp_badstats")
	badStats.Stats = json.RawMessage(`{"files":`)
	_, err = e.s.CreateBackup(e.ctx, &badStats)
	mustErrIs(e.t, err, store.ErrInvalid, "CreateBackup with Stats not JSON")
	for _, id := range []string{"bkp_nottl", "bkp_badstats"} {
		_, err = e.s.GetBackup(e.ctx, id)
		mustErrIs(e.t, err, store.ErrNotFound, "GetBackup after a rejected create of "+id)
	}
}

func testLatestBackup(e *sbEnv) {
	key := store.BackupKey{TenantID: "tnt_a", Environment: "env", SessionKey: "sess"}
	now := sbAt(10 * time.Hour)
	mk := func(id string, k store.BackupKey, created, expires time.Duration) {
		e.backup(store.Backup{ID: id, TenantID: k.TenantID, Environment: k.Environment, SessionKey: k.SessionKey,
			SandboxID: "sbx_1", CreatedAt: sbAt(created), ExpiresAt: sbAt(expires)})
	}
	_, err := e.s.LatestBackup(e.ctx, key, now)
	mustErrIs(e.t, err, store.ErrNotFound, "LatestBackup with no backups")

	mk("bkp_1", key, 1*time.Hour, 20*time.Hour)
	mk("bkp_3", key, 2*time.Hour, 20*time.Hour)
	mk("bkp_2", key, 2*time.Hour, 20*time.Hour) // same CreatedAt as bkp_3: the greater id wins
	mk("bkp_4", key, 3*time.Hour, 10*time.Hour) // newest, but expires exactly at now
	mk("bkp_5", key, 4*time.Hour, 9*time.Hour)  // newest, but expired
	// Newer backups for keys that differ in one part only.
	mk("bkp_6", store.BackupKey{TenantID: "tnt_b", Environment: "env", SessionKey: "sess"}, 5*time.Hour, 20*time.Hour)
	mk("bkp_7", store.BackupKey{TenantID: "tnt_a", Environment: "env2", SessionKey: "sess"}, 5*time.Hour, 20*time.Hour)
	mk("bkp_8", store.BackupKey{TenantID: "tnt_a", Environment: "env", SessionKey: "sess2"}, 5*time.Hour, 20*time.Hour)

	b, err := e.s.LatestBackup(e.ctx, key, now)
	mustOK(e.t, err, "LatestBackup")
	equal(e.t, "latest at now", b.ID, "bkp_3")
	sbSameTime(e.t, "latest CreatedAt", b.CreatedAt, sbAt(2*time.Hour))

	b, err = e.s.LatestBackup(e.ctx, key, sbAt(5*time.Hour))
	mustOK(e.t, err, "LatestBackup earlier")
	equal(e.t, "latest before bkp_4 and bkp_5 expired", b.ID, "bkp_5")

	b, err = e.s.LatestBackup(e.ctx, store.BackupKey{TenantID: "tnt_b", Environment: "env", SessionKey: "sess"}, now)
	mustOK(e.t, err, "LatestBackup for tenant b")
	equal(e.t, "latest for tenant b", b.ID, "bkp_6")

	_, err = e.s.LatestBackup(e.ctx, key, sbAt(20*time.Hour))
	mustErrIs(e.t, err, store.ErrNotFound, "LatestBackup when every backup has expired")
	_, err = e.s.LatestBackup(e.ctx, store.BackupKey{TenantID: "tnt_a", Environment: "env"}, now)
	mustErrIs(e.t, err, store.ErrNotFound, "LatestBackup for an empty session key")
}

func testListBackups(e *sbEnv) {
	sbEqualIDs(e.t, "no backups", e.listBackupIDs("sbx_1"))
	for i, c := range []struct {
		id, sandbox string
		created     time.Duration
	}{
		{"bkp_b", "sbx_1", time.Hour},
		{"bkp_a", "sbx_1", 3 * time.Hour},
		{"bkp_d", "sbx_1", 2 * time.Hour},
		{"bkp_c", "sbx_1", 2 * time.Hour},
		{"bkp_e", "sbx_2", 4 * time.Hour},
		{"bkp_f", "sbx_1", 0}, // expired but not yet reaped: still listed
	} {
		e.backup(store.Backup{ID: c.id, TenantID: "tnt_a", SandboxID: c.sandbox, Generation: int64(i),
			CreatedAt: sbAt(c.created), ExpiresAt: sbAt(c.created + time.Minute)})
	}
	sbEqualIDs(e.t, "sbx_1", e.listBackupIDs("sbx_1"), "bkp_a", "bkp_d", "bkp_c", "bkp_b", "bkp_f")
	sbEqualIDs(e.t, "sbx_2", e.listBackupIDs("sbx_2"), "bkp_e")
	sbEqualIDs(e.t, "unknown sandbox", e.listBackupIDs("sbx_missing"))
}

func testDeleteExpiredBackups(e *sbEnv) {
	now := sbAt(10 * time.Hour)
	var expired, kept []string
	for i, expires := range []time.Duration{-time.Hour, 0, time.Microsecond, 10 * time.Hour, -time.Microsecond, time.Hour} {
		id := fmt.Sprintf("bkp_%d", i)
		e.backup(store.Backup{ID: id, TenantID: "tnt_a", SandboxID: "sbx_1", BlobKey: "blob/" + id,
			CreatedAt: sbAt(time.Duration(i) * time.Minute), ExpiresAt: now.Add(expires)})
		if expires <= 0 {
			expired = append(expired, id)
		} else {
			kept = append(kept, id)
		}
	}
	got, err := e.s.DeleteExpiredBackups(e.ctx, now)
	mustOK(e.t, err, "DeleteExpiredBackups")
	ids := sbBackupIDs(got)
	sort.Strings(ids)
	sbEqualIDs(e.t, "deleted", ids, expired...)
	for _, b := range got {
		equal(e.t, "returned backup's BlobKey", b.BlobKey, "blob/"+b.ID)
		if b.ExpiresAt.After(now) {
			e.t.Fatalf("returned backup %s expires at %v, after now %v", b.ID, b.ExpiresAt, now)
		}
		_, err := e.s.GetBackup(e.ctx, b.ID)
		mustErrIs(e.t, err, store.ErrNotFound, "GetBackup of a deleted expired backup")
	}
	for _, id := range kept {
		_, err := e.s.GetBackup(e.ctx, id)
		mustOK(e.t, err, "GetBackup of an unexpired backup")
	}
	again, err := e.s.DeleteExpiredBackups(e.ctx, now)
	mustOK(e.t, err, "DeleteExpiredBackups again")
	sbEqualIDs(e.t, "deleted on the second pass", sbBackupIDs(again))
}
