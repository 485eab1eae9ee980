package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ExerciseSkills runs the SkillStore contract. newStore must return a
// fresh, empty store for each call and arrange its Close with t.Cleanup.
func ExerciseSkills(ctx context.Context, t *testing.T, newStore func(t *testing.T) store.SkillStore) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(e *skEnv)
	}{
		{"SkillCreateGet", testSkillCreateGet},
		{"SkillList", testSkillList},
		{"VersionsLatestAndList", testSkillVersions},
		{"DeleteVersionKeepsOne", testSkillDeleteVersion},
		{"DeleteSkillReturnsVersions", testSkillDelete},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.fn(&skEnv{ctx: ctx, t: t, s: newStore(t)})
		})
	}
}

type skEnv struct {
	ctx context.Context
	t   *testing.T
	s   store.SkillStore
}

func skVersion(version string) *store.SkillVersion {
	return &store.SkillVersion{Version: version, Name: "pdf", Description: "Reads PDFs", Directory: "pdf",
		BlobKey: "skills/" + version, SHA256: "ab", Size: 10, Files: 2}
}

func (e *skEnv) skill(id, tenant, version string) *store.Skill {
	e.t.Helper()
	s, v, err := e.s.CreateSkill(e.ctx, &store.Skill{ID: id, TenantID: tenant, DisplayName: "PDF " + id}, skVersion(version))
	mustOK(e.t, err, fmt.Sprintf("CreateSkill(%q)", id))
	if v.SkillID != id || v.TenantID != tenant || v.Version != version {
		e.t.Fatalf("first version = %+v, want skill %q tenant %q version %q", v, id, tenant, version)
	}
	return s
}

func testSkillCreateGet(e *skEnv) {
	created := e.skill("skill_1", mgTenant, "1000000000000001")
	if created.LatestVersion != "1000000000000001" || created.DisplayName != "PDF skill_1" || created.CreatedAt.IsZero() {
		e.t.Fatalf("created = %+v", created)
	}
	got, err := e.s.GetSkill(e.ctx, "skill_1")
	mustOK(e.t, err, "GetSkill")
	if got.TenantID != mgTenant || got.LatestVersion != created.LatestVersion || !got.CreatedAt.Equal(created.CreatedAt) {
		e.t.Fatalf("got %+v, created %+v", got, created)
	}
	_, err = e.s.GetSkill(e.ctx, "skill_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetSkill(missing)")
	_, _, err = e.s.CreateSkill(e.ctx, &store.Skill{ID: "skill_1", TenantID: mgTenant}, skVersion("1000000000000009"))
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CreateSkill(same id)")
	// The refused create left no version behind.
	_, err = e.s.GetSkillVersion(e.ctx, "skill_1", "1000000000000009")
	mustErrIs(e.t, err, store.ErrNotFound, "GetSkillVersion(of the refused create)")
	v, err := e.s.GetSkillVersion(e.ctx, "skill_1", "1000000000000001")
	mustOK(e.t, err, "GetSkillVersion")
	if v.Name != "pdf" || v.Description != "Reads PDFs" || v.Directory != "pdf" || v.BlobKey != "skills/1000000000000001" ||
		v.Size != 10 || v.Files != 2 || v.SHA256 != "ab" {
		e.t.Fatalf("version = %+v", v)
	}
}

func testSkillList(e *skEnv) {
	for _, id := range []string{"skill_c", "skill_a", "skill_b"} {
		e.skill(id, mgTenant, "1000000000000001")
	}
	e.skill("skill_other", "tnt_other", "1000000000000001")
	page, err := e.s.ListSkills(e.ctx, store.ListResourcesParams{TenantID: mgTenant, Limit: 2})
	mustOK(e.t, err, "ListSkills")
	if len(page) != 2 || page[0].ID != "skill_a" || page[1].ID != "skill_b" {
		e.t.Fatalf("first page = %v", skillIDs(page))
	}
	page, err = e.s.ListSkills(e.ctx, store.ListResourcesParams{TenantID: mgTenant, Limit: 2, AfterID: "skill_b"})
	mustOK(e.t, err, "ListSkills(after)")
	if len(page) != 1 || page[0].ID != "skill_c" || page[0].LatestVersion != "1000000000000001" {
		e.t.Fatalf("second page = %v", skillIDs(page))
	}
}

func skillIDs(ss []*store.Skill) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.ID
	}
	return out
}

func testSkillVersions(e *skEnv) {
	first := e.skill("skill_1", mgTenant, "1000000000000001")
	at := first.UpdatedAt.Add(time.Second)
	for _, ver := range []string{"1000000000000003", "1000000000000002"} {
		v := skVersion(ver)
		v.SkillID, v.TenantID, v.CreatedAt = "skill_1", mgTenant, at
		_, err := e.s.CreateSkillVersion(e.ctx, v)
		mustOK(e.t, err, "CreateSkillVersion("+ver+")")
	}
	dup := skVersion("1000000000000002")
	dup.SkillID = "skill_1"
	_, err := e.s.CreateSkillVersion(e.ctx, dup)
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CreateSkillVersion(existing version)")
	orphan := skVersion("1000000000000004")
	orphan.SkillID = "skill_missing"
	_, err = e.s.CreateSkillVersion(e.ctx, orphan)
	mustErrIs(e.t, err, store.ErrNotFound, "CreateSkillVersion(unknown skill)")

	got, err := e.s.GetSkill(e.ctx, "skill_1")
	mustOK(e.t, err, "GetSkill")
	if got.LatestVersion != "1000000000000003" || !got.UpdatedAt.Equal(at) {
		e.t.Fatalf("skill after versions = %+v, want latest 1000000000000003 updated %v", got, at)
	}
	vs, err := e.s.ListSkillVersions(e.ctx, "skill_1", "", 2)
	mustOK(e.t, err, "ListSkillVersions")
	if len(vs) != 2 || vs[0].Version != "1000000000000003" || vs[1].Version != "1000000000000002" {
		e.t.Fatalf("first page of versions = %+v", vs)
	}
	vs, err = e.s.ListSkillVersions(e.ctx, "skill_1", "1000000000000002", 2)
	mustOK(e.t, err, "ListSkillVersions(after)")
	if len(vs) != 1 || vs[0].Version != "1000000000000001" {
		e.t.Fatalf("second page of versions = %+v", vs)
	}
}

func testSkillDeleteVersion(e *skEnv) {
	e.skill("skill_1", mgTenant, "1000000000000001")
	v := skVersion("1000000000000002")
	v.SkillID = "skill_1"
	_, err := e.s.CreateSkillVersion(e.ctx, v)
	mustOK(e.t, err, "CreateSkillVersion")
	gone, err := e.s.DeleteSkillVersion(e.ctx, "skill_1", "1000000000000002")
	mustOK(e.t, err, "DeleteSkillVersion(latest)")
	if gone.BlobKey != "skills/1000000000000002" {
		e.t.Fatalf("deleted version = %+v", gone)
	}
	got, err := e.s.GetSkill(e.ctx, "skill_1")
	mustOK(e.t, err, "GetSkill")
	if got.LatestVersion != "1000000000000001" {
		e.t.Fatalf("latest after deleting the newest = %q, want the older one", got.LatestVersion)
	}
	_, err = e.s.DeleteSkillVersion(e.ctx, "skill_1", "1000000000000002")
	mustErrIs(e.t, err, store.ErrNotFound, "DeleteSkillVersion(again)")
	_, err = e.s.DeleteSkillVersion(e.ctx, "skill_1", "1000000000000001")
	mustErrIs(e.t, err, store.ErrConflict, "DeleteSkillVersion(the only one)")
	_, err = e.s.GetSkillVersion(e.ctx, "skill_1", "1000000000000001")
	mustOK(e.t, err, "GetSkillVersion(the refused delete kept it)")
}

func testSkillDelete(e *skEnv) {
	e.skill("skill_1", mgTenant, "1000000000000001")
	v := skVersion("1000000000000002")
	v.SkillID = "skill_1"
	_, err := e.s.CreateSkillVersion(e.ctx, v)
	mustOK(e.t, err, "CreateSkillVersion")
	gone, err := e.s.DeleteSkill(e.ctx, "skill_1")
	mustOK(e.t, err, "DeleteSkill")
	if len(gone) != 2 || gone[0].BlobKey != "skills/1000000000000001" || gone[1].BlobKey != "skills/1000000000000002" {
		e.t.Fatalf("deleted versions = %+v", gone)
	}
	_, err = e.s.GetSkill(e.ctx, "skill_1")
	mustErrIs(e.t, err, store.ErrNotFound, "GetSkill(deleted)")
	_, err = e.s.GetSkillVersion(e.ctx, "skill_1", "1000000000000001")
	mustErrIs(e.t, err, store.ErrNotFound, "GetSkillVersion(of a deleted skill)")
	_, err = e.s.DeleteSkill(e.ctx, "skill_1")
	mustErrIs(e.t, err, store.ErrNotFound, "DeleteSkill(again)")
}
