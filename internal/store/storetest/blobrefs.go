package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// blobRefCases: ReferencedBlobKeys sees every row kind that holds a blob
// key (store.BlobKeyColumns), and nothing else; the blob GC deletes what it
// does not return.
var blobRefCases = []testCase{
	{"EveryRowKindCounts", testBlobRefsRowKinds},
	{"LongListsAreSplit", testBlobRefsLongList},
	{"ObjectBundlesHoldTheirBlob", testBlobRefsObjectBundles},
	{"FilesHoldTheirBlob", testBlobRefsFiles},
	{"SkillVersionsHoldTheirBlob", testBlobRefsSkillVersions},
}

// testBlobRefsSkillVersions: a skill version's archive is held while its
// row exists, by a version deleted alone and by a skill deleted whole.
func testBlobRefsSkillVersions(e *env) {
	v := func(ver string) *store.SkillVersion {
		return &store.SkillVersion{SkillID: "skill_gc", Version: ver, Name: "s", Description: "d", Directory: "s", BlobKey: "skills/" + ver}
	}
	_, _, err := e.s.CreateSkill(e.ctx, &store.Skill{ID: "skill_gc", TenantID: e.tenant, DisplayName: "s"}, v("1"))
	mustOK(e.t, err, "CreateSkill")
	_, err = e.s.CreateSkillVersion(e.ctx, v("2"))
	mustOK(e.t, err, "CreateSkillVersion")
	keys := []string{"skills/1", "skills/2"}
	held := func(want ...string) {
		e.t.Helper()
		got, err := e.s.ReferencedBlobKeys(e.ctx, keys)
		mustOK(e.t, err, "ReferencedBlobKeys")
		if len(got) != len(want) {
			e.t.Fatalf("referenced %v, want %v", got, want)
		}
		for _, k := range want {
			if !got[k] {
				e.t.Fatalf("referenced %v, want %v", got, want)
			}
		}
	}
	held("skills/1", "skills/2")
	_, err = e.s.DeleteSkillVersion(e.ctx, "skill_gc", "2")
	mustOK(e.t, err, "DeleteSkillVersion")
	held("skills/1")
	_, err = e.s.DeleteSkill(e.ctx, "skill_gc")
	mustOK(e.t, err, "DeleteSkill")
	held()
}

func testBlobRefsRowKinds(e *env) {
	now := time.Now()
	got, err := e.s.ReferencedBlobKeys(e.ctx, nil)
	mustOK(e.t, err, "ReferencedBlobKeys(nil)")
	equal(e.t, "referenced of no keys", len(got), 0)

	_, err = e.s.CreateBackup(e.ctx, &store.Backup{ID: "bkp_live", TenantID: e.tenant, SandboxID: "sbx_1",
		BlobKey: "backups/live", CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
	mustOK(e.t, err, "CreateBackup live")
	_, err = e.s.CreateBackup(e.ctx, &store.Backup{ID: "bkp_old", TenantID: e.tenant, SandboxID: "sbx_1",
		BlobKey: "backups/expired", CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(-time.Hour)})
	mustOK(e.t, err, "CreateBackup expired")
	_, err = e.s.SaveTranscript(e.ctx, &store.Transcript{TaskID: "tsk_1", BlobKey: "transcripts/t1", SavedAt: now})
	mustOK(e.t, err, "SaveTranscript blob")
	_, err = e.s.SaveTranscript(e.ctx, &store.Transcript{TaskID: "tsk_1", Content: []byte("inline"), SavedAt: now})
	mustOK(e.t, err, "SaveTranscript inline")

	keys := []string{"backups/live", "backups/expired", "transcripts/t1", "backups/orphan", ""}
	got, err = e.s.ReferencedBlobKeys(e.ctx, keys)
	mustOK(e.t, err, "ReferencedBlobKeys")
	want := map[string]bool{"backups/live": true, "backups/expired": true, "transcripts/t1": true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		e.t.Fatalf("referenced %v, want %v (an expired backup's row still holds its blob until the reaper deletes the row)", got, want)
	}

	// Once the reaper deleted the row, its blob is no longer referenced.
	_, err = e.s.DeleteExpiredBackups(e.ctx, now)
	mustOK(e.t, err, "DeleteExpiredBackups")
	got, err = e.s.ReferencedBlobKeys(e.ctx, keys)
	mustOK(e.t, err, "ReferencedBlobKeys after expiry")
	delete(want, "backups/expired")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		e.t.Fatalf("after the expired row was deleted: referenced %v, want %v", got, want)
	}
}

func testBlobRefsLongList(e *env) {
	now := time.Now()
	var keys []string
	for i := range 2*store.BlobRefBatch + 7 {
		keys = append(keys, fmt.Sprintf("backups/k%05d", i))
	}
	// One referenced key in each batch the engine cuts the list into.
	refd := []string{keys[0], keys[store.BlobRefBatch], keys[len(keys)-1]}
	for i, k := range refd {
		_, err := e.s.CreateBackup(e.ctx, &store.Backup{ID: fmt.Sprintf("bkp_%d", i), TenantID: e.tenant,
			SandboxID: "sbx_1", BlobKey: k, CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
		mustOK(e.t, err, "CreateBackup")
	}
	got, err := e.s.ReferencedBlobKeys(e.ctx, keys)
	mustOK(e.t, err, "ReferencedBlobKeys")
	equal(e.t, "referenced keys", len(got), len(refd))
	for _, k := range refd {
		if !got[k] {
			e.t.Fatalf("%s is referenced but not returned among %d keys", k, len(keys))
		}
	}
}

// CheckBlobKeyColumns fails t unless the columns of an engine's schema
// that are named like blob_key (found by the engine's own test) are
// exactly store.BlobKeyColumns: a column that holds blob keys but is not
// registered would have its blobs deleted by the blob GC.
func CheckBlobKeyColumns(t *testing.T, inSchema []store.BlobKeyColumn) {
	t.Helper()
	for _, c := range inSchema {
		if !slices.Contains(store.BlobKeyColumns, c) {
			t.Errorf("%s.%s holds blob keys but is not in store.BlobKeyColumns: the blob GC would delete its blobs", c.Table, c.Column)
		}
	}
	if len(inSchema) != len(store.BlobKeyColumns) {
		t.Errorf("the schema has %d blob key columns %v, store.BlobKeyColumns lists %d: %v",
			len(inSchema), inSchema, len(store.BlobKeyColumns), store.BlobKeyColumns)
	}
}

// A class's bundle row holds its blob until the row goes (bundle deleted,
// replaced, or the class deleted); two classes that uploaded the same
// archive hold one key, which stays referenced while either row does.
func testBlobRefsObjectBundles(e *env) {
	shared, other := "bundles/"+e.tenant+"/sha256/aaaa", "bundles/"+e.tenant+"/sha256/bbbb"
	for _, c := range []string{"counter", "timer"} {
		_, err := e.s.PutObjectClass(e.ctx, &store.ObjectClass{TenantID: e.tenant, Class: c})
		mustOK(e.t, err, "PutObjectClass "+c)
		_, err = e.s.PutObjectBundle(e.ctx, &store.ObjectBundle{TenantID: e.tenant, Class: c, BlobKey: shared, SHA256: "aaaa", Size: 1})
		mustOK(e.t, err, "PutObjectBundle "+c)
	}
	refd := func(what string, want ...string) {
		e.t.Helper()
		got, err := e.s.ReferencedBlobKeys(e.ctx, []string{shared, other})
		mustOK(e.t, err, "ReferencedBlobKeys")
		w := map[string]bool{}
		for _, k := range want {
			w[k] = true
		}
		if fmt.Sprint(got) != fmt.Sprint(w) {
			e.t.Fatalf("%s: referenced %v, want %v", what, got, w)
		}
	}
	refd("two classes with one archive", shared)
	_, err := e.s.PutObjectBundle(e.ctx, &store.ObjectBundle{TenantID: e.tenant, Class: "counter", BlobKey: other, SHA256: "bbbb", Size: 1})
	mustOK(e.t, err, "PutObjectBundle counter again")
	refd("after counter's re-upload", shared, other)
	mustOK(e.t, e.s.DeleteObjectClass(e.ctx, e.tenant, "timer"), "DeleteObjectClass timer")
	refd("after timer's class was deleted", other)
	mustOK(e.t, e.s.DeleteObjectBundle(e.ctx, e.tenant, "counter"), "DeleteObjectBundle counter")
	refd("after counter's bundle was deleted")
}

// A file's row holds its blob until the file is deleted.
func testBlobRefsFiles(e *env) {
	key := "files/file_ref"
	_, err := e.s.CreateFile(e.ctx, &store.File{ID: "file_ref", TenantID: e.tenant, Filename: "a", MimeType: "text/plain", BlobKey: key})
	mustOK(e.t, err, "CreateFile")
	got, err := e.s.ReferencedBlobKeys(e.ctx, []string{key})
	mustOK(e.t, err, "ReferencedBlobKeys")
	if !got[key] {
		e.t.Fatalf("a file's blob %s is not referenced while its row exists: the blob GC would delete it", key)
	}
	_, err = e.s.DeleteFile(e.ctx, e.tenant, "file_ref")
	mustOK(e.t, err, "DeleteFile")
	got, err = e.s.ReferencedBlobKeys(e.ctx, []string{key})
	mustOK(e.t, err, "ReferencedBlobKeys after delete")
	equal(e.t, "referenced after the file was deleted", len(got), 0)
}
