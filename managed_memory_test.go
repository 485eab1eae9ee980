package agentkernel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/memory"
	"github.com/agentkernel/agentkernel/internal/store"
)

// onEngines runs fn against a daemon on SQLite and, when
// AGENTKERNEL_TEST_POSTGRES_URL is set, on a fresh PostgreSQL database.
func onEngines(t *testing.T, fn func(t *testing.T, d *daemontest.Daemon)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, daemontest.Start(t)) })
	t.Run("postgres", func(t *testing.T) {
		u := freshPostgres(t)
		fn(t, daemontest.Start(t, func(c *config.Config) { c.Store.Engine, c.Store.URL = "postgres", u }))
	})
}

func sha(s string) string { d, _ := store.MemoryDigest(s); return d }

func TestMemoryStoresThroughTheSDK(t *testing.T) {
	onEngines(t, func(t *testing.T, d *daemontest.Daemon) {
		ctx := context.Background()
		c := sdkClient(d, d.AdminKey)
		ms := c.Beta.MemoryStores

		// Stores: create, get, update (metadata patch), list with paging.
		st, err := ms.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "notes", Description: anthropic.String("what we learnt"),
			Metadata: map[string]string{"team": "infra", "drop": "me"}})
		if err != nil || !strings.HasPrefix(st.ID, "memstore_") || st.Type != "memory_store" || st.Name != "notes" ||
			st.Description != "what we learnt" || st.Metadata["team"] != "infra" || !st.ArchivedAt.IsZero() || st.CreatedAt.IsZero() {
			t.Fatalf("create store: %+v %v", st, err)
		}
		up, err := ms.Update(ctx, st.ID, anthropic.BetaMemoryStoreUpdateParams{Name: anthropic.String("team notes"),
			Metadata: map[string]string{"env": "p"}})
		if err != nil || up.Name != "team notes" || up.Description != "what we learnt" || up.Metadata["team"] != "infra" || up.Metadata["env"] != "p" {
			t.Fatalf("update store: %+v %v", up, err)
		}
		got, err := ms.Get(ctx, st.ID, anthropic.BetaMemoryStoreGetParams{})
		if err != nil || got.Name != "team notes" {
			t.Fatalf("get store: %+v %v", got, err)
		}
		var others []string
		for _, n := range []string{"b", "c"} {
			o, err := ms.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: n})
			if err != nil {
				t.Fatal(err)
			}
			others = append(others, o.ID)
		}
		countStores := func(p anthropic.BetaMemoryStoreListParams) int {
			n := 0
			for range ms.ListAutoPaging(ctx, p).All() {
				n++
			}
			return n
		}
		if n := countStores(anthropic.BetaMemoryStoreListParams{Limit: anthropic.Int(1)}); n != 3 {
			t.Fatalf("listed %d stores, want 3", n)
		}

		// Memories: create (basic view by default), get (full), update with
		// a precondition, rename, delete with an expected digest.
		mem := ms.Memories
		a, err := mem.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/projects/a.md", Content: anthropic.String("alpha")})
		if err != nil || !strings.HasPrefix(a.ID, "mem_") || a.Type != "memory" || a.Content != "" || a.ContentSha256 != sha("alpha") ||
			a.ContentSizeBytes != 5 || a.MemoryStoreID != st.ID || !strings.HasPrefix(a.MemoryVersionID, "memver_") {
			t.Fatalf("create memory: %+v %v", a, err)
		}
		if !strings.Contains(a.RawJSON(), `"content":null`) {
			t.Fatalf("basic view must send content null: %s", a.RawJSON())
		}
		ga, err := mem.Get(ctx, a.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: st.ID})
		if err != nil || ga.Content != "alpha" || ga.Path != "/projects/a.md" {
			t.Fatalf("get memory: %+v %v", ga, err)
		}
		_, err = mem.Update(ctx, a.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: st.ID, Content: anthropic.String("x"),
			Precondition: anthropic.BetaManagedAgentsPreconditionParam{Type: "content_sha256", ContentSha256: anthropic.String(sha("stale"))}})
		wantStatus(t, "update with a stale precondition", err, 409, "precondition")
		ua, err := mem.Update(ctx, a.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: st.ID, Content: anthropic.String("alpha 2"),
			Precondition: anthropic.BetaManagedAgentsPreconditionParam{Type: "content_sha256", ContentSha256: anthropic.String(sha("alpha"))},
			View:         anthropic.BetaManagedAgentsMemoryViewFull})
		if err != nil || ua.Content != "alpha 2" || ua.MemoryVersionID == a.MemoryVersionID {
			t.Fatalf("update memory: %+v %v", ua, err)
		}
		ra, err := mem.Update(ctx, a.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: st.ID, Path: anthropic.String("/projects/alpha.md")})
		if err != nil || ra.ID != a.ID || ra.Path != "/projects/alpha.md" {
			t.Fatalf("rename memory: %+v %v", ra, err)
		}
		for _, p := range []string{"/projects/deep/one.md", "/projects/deep/two.md", "/projects-old/x.md", "/top.md"} {
			if _, err := mem.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: p, Content: anthropic.String(p)}); err != nil {
				t.Fatal(p, err)
			}
		}
		_, err = mem.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/top.md", Content: anthropic.String("again")})
		wantStatus(t, "create on a taken path", err, 409, "/top.md")

		// Listing: a prefix matches whole segments; depth 1 rolls deeper
		// memories up into memory_prefix items; pages follow next_page.
		list := func(p anthropic.BetaMemoryStoreMemoryListParams) []string {
			var out []string
			for it := range mem.ListAutoPaging(ctx, st.ID, p).All() {
				out = append(out, it.Type+" "+it.Path)
			}
			return out
		}
		if got := strings.Join(list(anthropic.BetaMemoryStoreMemoryListParams{PathPrefix: anthropic.String("/projects/"), Limit: anthropic.Int(1)}), ","); got !=
			"memory /projects/alpha.md,memory /projects/deep/one.md,memory /projects/deep/two.md" {
			t.Fatalf("prefix /projects/: %s", got)
		}
		if got := strings.Join(list(anthropic.BetaMemoryStoreMemoryListParams{Depth: anthropic.Int(1), Limit: anthropic.Int(1)}), ","); got !=
			"memory_prefix /projects-old/,memory_prefix /projects/,memory /top.md" {
			t.Fatalf("depth 1: %s", got)
		}
		if got := strings.Join(list(anthropic.BetaMemoryStoreMemoryListParams{PathPrefix: anthropic.String("/projects/"), Depth: anthropic.Int(1)}), ","); got !=
			"memory /projects/alpha.md,memory_prefix /projects/deep/" {
			t.Fatalf("depth 1 under /projects/: %s", got)
		}
		page, err := mem.List(ctx, st.ID, anthropic.BetaMemoryStoreMemoryListParams{View: anthropic.BetaManagedAgentsMemoryViewFull, Limit: anthropic.Int(100)})
		if err != nil || len(page.Data) != 5 || page.Data[0].Content == "" || page.Data[0].AsAny() == nil {
			t.Fatalf("full view list: %+v %v", page, err)
		}
		if _, ok := page.Data[0].AsAny().(anthropic.BetaManagedAgentsMemory); !ok {
			t.Fatalf("list item is %T", page.Data[0].AsAny())
		}

		// Versions: the API key is the author; redaction clears a past
		// version and refuses the current one.
		vs := ms.MemoryVersions
		history, err := vs.List(ctx, st.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{MemoryID: anthropic.String(a.ID), View: anthropic.BetaManagedAgentsMemoryViewFull})
		if err != nil || len(history.Data) != 3 {
			t.Fatalf("versions of %s: %+v %v", a.ID, history, err)
		}
		first := history.Data[2]
		if first.Operation != "created" || first.Content != "alpha" || first.Path != "/projects/a.md" || first.CreatedBy.Type != "api_actor" ||
			first.CreatedBy.APIKeyID == "" || history.Data[0].Operation != "modified" || history.Data[0].Path != "/projects/alpha.md" {
			t.Fatalf("history: %+v", history.Data)
		}
		byKey, err := vs.List(ctx, st.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{APIKeyID: anthropic.String(first.CreatedBy.APIKeyID), Limit: anthropic.Int(100)})
		if err != nil || len(byKey.Data) != 7 {
			t.Fatalf("versions by the key: %d %v", len(byKey.Data), err)
		}
		_, err = vs.Redact(ctx, history.Data[0].ID, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: st.ID})
		wantStatus(t, "redact the current version", err, 409, "current")
		red, err := vs.Redact(ctx, first.ID, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: st.ID})
		if err != nil || red.RedactedAt.IsZero() || red.Content != "" || red.Path != "" || red.ContentSha256 != "" ||
			red.RedactedBy.Type != "api_actor" || red.CreatedBy.Type != "api_actor" || !strings.Contains(red.RawJSON(), `"path":null`) {
			t.Fatalf("redact: %+v %v", red, err)
		}
		gv, err := vs.Get(ctx, first.ID, anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: st.ID})
		if err != nil || gv.Content != "" || gv.RedactedAt.IsZero() {
			t.Fatalf("get redacted version: %+v %v", gv, err)
		}

		// Delete with a stale, then the right, expected digest; the history
		// stays listable by the deleted memory's id.
		_, err = mem.Delete(ctx, a.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: st.ID, ExpectedContentSha256: anthropic.String(sha("alpha"))})
		wantStatus(t, "delete with a stale digest", err, 409)
		del, err := mem.Delete(ctx, a.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: st.ID, ExpectedContentSha256: anthropic.String(sha("alpha 2"))})
		if err != nil || del.ID != a.ID || del.Type != "memory_deleted" {
			t.Fatalf("delete memory: %+v %v", del, err)
		}
		_, err = mem.Get(ctx, a.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: st.ID})
		wantStatus(t, "get a deleted memory", err, 404, a.ID)
		after, err := vs.List(ctx, st.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{MemoryID: anthropic.String(a.ID),
			Operation: anthropic.BetaManagedAgentsMemoryVersionOperationDeleted})
		if err != nil || len(after.Data) != 1 || after.Data[0].Path != "/projects/alpha.md" || after.Data[0].ContentSha256 != "" {
			t.Fatalf("deleted version: %+v %v", after, err)
		}

		// Archive: readable, refuses writes; delete removes everything.
		arch, err := ms.Archive(ctx, others[0], anthropic.BetaMemoryStoreArchiveParams{})
		if err != nil || arch.ArchivedAt.IsZero() {
			t.Fatalf("archive: %+v %v", arch, err)
		}
		_, err = mem.New(ctx, others[0], anthropic.BetaMemoryStoreMemoryNewParams{Path: "/x.md", Content: anthropic.String("x")})
		wantStatus(t, "write to an archived store", err, 409, "archived")
		_, err = ms.Update(ctx, others[0], anthropic.BetaMemoryStoreUpdateParams{Name: anthropic.String("y")})
		wantStatus(t, "update an archived store", err, 409, "archived")
		if n := countStores(anthropic.BetaMemoryStoreListParams{}); n != 2 {
			t.Fatalf("listed %d live stores, want 2", n)
		}
		if n := countStores(anthropic.BetaMemoryStoreListParams{IncludeArchived: anthropic.Bool(true)}); n != 3 {
			t.Fatalf("listed %d stores with archived, want 3", n)
		}
		ds, err := ms.Delete(ctx, others[1], anthropic.BetaMemoryStoreDeleteParams{})
		if err != nil || ds.ID != others[1] || ds.Type != "memory_store_deleted" {
			t.Fatalf("delete store: %+v %v", ds, err)
		}
		_, err = ms.Get(ctx, others[1], anthropic.BetaMemoryStoreGetParams{})
		wantStatus(t, "get a deleted store", err, 404, others[1])
	})
}

// TestMemoryBadInputAndTenancy: paths that could escape a mount, oversized
// content and another tenant's ids are refused, naming the field or limit,
// and nothing is written.
func TestMemoryBadInputAndTenancy(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	c := sdkClient(d, d.AdminKey)
	st, err := c.Beta.MemoryStores.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "s"})
	if err != nil {
		t.Fatal(err)
	}
	mem := c.Beta.MemoryStores.Memories
	for _, p := range []string{"", "notes.md", "/a/../b.md", "/..", "/a/./b", "/a//b", "/a/", "/a\x00b", "/a\u2028b", "/e\u0301", "/" + strings.Repeat("a/", 20) + "x",
		"/" + strings.Repeat("x", 1024)} {
		_, err := mem.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: p, Content: anthropic.String("x")})
		wantStatus(t, "path "+p, err, 400, "path")
	}
	_, err = mem.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/big.md", Content: anthropic.String(strings.Repeat("x", memory.MaxContentBytes+1))})
	wantStatus(t, "oversized content", err, 413, "content", "102400")
	ok, err := mem.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/ok.md", Content: anthropic.String(strings.Repeat("x", memory.MaxContentBytes))})
	if err != nil {
		t.Fatalf("content at the limit: %v", err)
	}
	_, err = mem.Update(ctx, ok.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: st.ID, Path: anthropic.String("/../etc/passwd")})
	wantStatus(t, "rename out of the store", err, 400, "path")
	_, err = mem.List(ctx, st.ID, anthropic.BetaMemoryStoreMemoryListParams{PathPrefix: anthropic.String("/no-slash")})
	wantStatus(t, "prefix without /", err, 400, "path_prefix")
	page, err := mem.List(ctx, st.ID, anthropic.BetaMemoryStoreMemoryListParams{})
	if err != nil || len(page.Data) != 1 {
		t.Fatalf("refused writes left %d memories: %v", len(page.Data), err)
	}

	other := sdkClient(d, tenantKey(t, d, "other"))
	_, err = other.Beta.MemoryStores.Get(ctx, st.ID, anthropic.BetaMemoryStoreGetParams{})
	wantStatus(t, "another tenant's store", err, 404, st.ID)
	_, err = other.Beta.MemoryStores.Memories.Get(ctx, ok.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: st.ID})
	wantStatus(t, "another tenant's memory", err, 404)
	_, err = other.Beta.MemoryStores.Memories.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/in.md", Content: anthropic.String("x")})
	wantStatus(t, "write into another tenant's store", err, 404)
	_, err = other.Beta.MemoryStores.Delete(ctx, st.ID, anthropic.BetaMemoryStoreDeleteParams{})
	wantStatus(t, "delete another tenant's store", err, 404)
	_, err = other.Beta.MemoryStores.MemoryVersions.Get(ctx, ok.MemoryVersionID, anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: st.ID})
	wantStatus(t, "another tenant's version", err, 404)
	if _, err := d.Memory().Snapshot(ctx, "tnt_nobody", st.ID); err == nil {
		t.Fatal("Snapshot of another tenant's store answered")
	}
}

// TestMemorySyncKeepsEveryWriteWithItsSession: two sessions change the same
// memory from the same base; both writes are versions, each with its
// session as author, and re-running a sync changes nothing.
func TestMemorySyncKeepsEveryWriteWithItsSession(t *testing.T) {
	onEngines(t, func(t *testing.T, d *daemontest.Daemon) {
		ctx := context.Background()
		c := sdkClient(d, d.AdminKey)
		st, err := c.Beta.MemoryStores.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "shared"})
		if err != nil {
			t.Fatal(err)
		}
		base, err := c.Beta.MemoryStores.Memories.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/plan.md", Content: anthropic.String("v0")})
		if err != nil {
			t.Fatal(err)
		}
		ms, err := d.Store().GetMemoryStore(ctx, st.ID)
		if err != nil {
			t.Fatal(err)
		}
		svc := d.Memory()
		snap, err := svc.Snapshot(ctx, ms.TenantID, st.ID)
		if err != nil || len(snap) != 1 || snap[0].VersionID != base.MemoryVersionID || snap[0].Content != "v0" {
			t.Fatalf("snapshot: %+v %v", snap, err)
		}
		one, two := "from session one", "from session two"
		changesA := []memory.Change{{Path: "/plan.md", Content: &one, BaseVersionID: base.MemoryVersionID}, {Path: "/a-only.md", Content: &one}}
		if _, err := svc.Sync(ctx, ms.TenantID, st.ID, memory.Actor{SessionID: "sesn_one"}, changesA); err != nil {
			t.Fatal(err)
		}
		// Session two started from the same base: its write is kept too. Its
		// deletion of a memory it never saw current is not applied: the
		// newer write wins over a stale delete.
		out, err := svc.Sync(ctx, ms.TenantID, st.ID, memory.Actor{SessionID: "sesn_two"},
			[]memory.Change{{Path: "/plan.md", Content: &two, BaseVersionID: base.MemoryVersionID}, {Path: "/a-only.md", BaseVersionID: "memver_stale"}})
		if err != nil || len(out) != 2 || out[0].Path != "/a-only.md" || out[0].Content != one || out[1].Content != two {
			t.Fatalf("second sync: %+v %v", out, err)
		}
		out, err = svc.Sync(ctx, ms.TenantID, st.ID, memory.Actor{SessionID: "sesn_two"}, []memory.Change{{Path: "/a-only.md", BaseVersionID: out[0].VersionID}})
		if err != nil || len(out) != 1 || out[0].Content != two {
			t.Fatalf("delete from the current version: %+v %v", out, err)
		}
		// Re-running session one's sync (as after a crash) writes nothing new
		// where its content is already current, and restores what it had.
		again, err := svc.Sync(ctx, ms.TenantID, st.ID, memory.Actor{SessionID: "sesn_one"}, changesA[1:])
		if err != nil || len(again) != 2 {
			t.Fatalf("re-run: %+v %v", again, err)
		}
		if _, err := svc.Sync(ctx, ms.TenantID, st.ID, memory.Actor{SessionID: "sesn_one"}, changesA[1:]); err != nil {
			t.Fatal(err)
		}
		vs := c.Beta.MemoryStores.MemoryVersions
		forSession := func(id string) []anthropic.BetaManagedAgentsMemoryVersion {
			p, err := vs.List(ctx, st.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{SessionID: anthropic.String(id), View: anthropic.BetaManagedAgentsMemoryViewFull})
			if err != nil {
				t.Fatal(err)
			}
			return p.Data
		}
		s1, s2 := forSession("sesn_one"), forSession("sesn_two")
		if len(s1) != 3 || len(s2) != 2 {
			t.Fatalf("session one wrote %d versions (want 3), session two %d (want 2)", len(s1), len(s2))
		}
		for _, v := range append(s1, s2...) {
			if v.CreatedBy.Type != "session_actor" || (v.CreatedBy.SessionID != "sesn_one" && v.CreatedBy.SessionID != "sesn_two") {
				t.Fatalf("version %s author %+v", v.ID, v.CreatedBy)
			}
		}
		plan, err := vs.List(ctx, st.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{MemoryID: anthropic.String(base.ID), View: anthropic.BetaManagedAgentsMemoryViewFull})
		if err != nil || len(plan.Data) != 3 || plan.Data[0].Content != two || plan.Data[1].Content != one || plan.Data[2].Content != "v0" {
			t.Fatalf("both writes of /plan.md must be versions: %+v %v", plan, err)
		}

		// Bad changes are refused whole, naming the path; an archived store
		// takes no sync.
		x := "x"
		if _, err := svc.Sync(ctx, ms.TenantID, st.ID, memory.Actor{SessionID: "sesn_one"}, []memory.Change{{Path: "/ok.md", Content: &x}, {Path: "/../escape", Content: &x}}); err == nil ||
			!strings.Contains(err.Error(), "/../escape") {
			t.Fatalf("sync with an escaping path: %v", err)
		}
		if snap, _ := svc.Snapshot(ctx, ms.TenantID, st.ID); len(snap) != 2 {
			t.Fatalf("a refused sync wrote: %+v", snap)
		}
		if _, err := c.Beta.MemoryStores.Archive(ctx, st.ID, anthropic.BetaMemoryStoreArchiveParams{}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Sync(ctx, ms.TenantID, st.ID, memory.Actor{SessionID: "sesn_one"}, []memory.Change{{Path: "/ok.md", Content: &x}}); err == nil {
			t.Fatal("an archived store took a sync")
		}
	})
}

// TestMemoryGeneratedSDKCalls makes the calls of the SDK's own generated
// tests (betamemorystore*_test.go, every optional parameter set) with real
// ids; the placeholders that are not ids (a "page" cursor, limit 0, which
// the SDK documents as 1 to 100) are replaced by real values.
func TestMemoryGeneratedSDKCalls(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	c := sdkClient(d, d.AdminKey)
	betas := []anthropic.AnthropicBeta{anthropic.AnthropicBetaMessageBatches2024_09_24}
	ws := anthropic.String("wrkspc_011CZkZaBF1tNoB5wlCeusgy")
	ms := c.Beta.MemoryStores
	st, err := ms.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "x", Description: anthropic.String("description"),
		Metadata: map[string]string{"foo": "string"}, Betas: betas, WorkspaceID: ws})
	if err != nil {
		t.Fatal(err)
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	_, err = ms.Get(ctx, st.ID, anthropic.BetaMemoryStoreGetParams{Betas: betas, WorkspaceID: ws})
	must("get store", err)
	_, err = ms.Update(ctx, st.ID, anthropic.BetaMemoryStoreUpdateParams{Description: anthropic.String("description"),
		Metadata: map[string]string{"foo": "string"}, Name: anthropic.String("x"), Betas: betas, WorkspaceID: ws})
	must("update store", err)
	now := time.Now()
	_, err = ms.List(ctx, anthropic.BetaMemoryStoreListParams{CreatedAtGte: anthropic.Time(now.Add(-time.Hour)), CreatedAtLte: anthropic.Time(now.Add(time.Hour)),
		IncludeArchived: anthropic.Bool(true), Limit: anthropic.Int(1), Betas: betas, WorkspaceID: ws})
	must("list stores", err)

	m, err := ms.Memories.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Content: anthropic.String("content"), Path: "/xx",
		View: anthropic.BetaManagedAgentsMemoryViewBasic, Betas: betas, WorkspaceID: ws})
	must("create memory", err)
	_, err = ms.Memories.Get(ctx, m.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: st.ID, View: anthropic.BetaManagedAgentsMemoryViewBasic, Betas: betas, WorkspaceID: ws})
	must("get memory", err)
	u, err := ms.Memories.Update(ctx, m.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: st.ID, Content: anthropic.String("content 2"),
		Path: anthropic.String("/xy"), View: anthropic.BetaManagedAgentsMemoryViewBasic,
		Precondition: anthropic.BetaManagedAgentsPreconditionParam{Type: anthropic.BetaManagedAgentsPreconditionTypeContentSha256, ContentSha256: anthropic.String(sha("content"))},
		Betas:        betas, WorkspaceID: ws})
	must("update memory", err)
	_, err = ms.Memories.List(ctx, st.ID, anthropic.BetaMemoryStoreMemoryListParams{Depth: anthropic.Int(0), Limit: anthropic.Int(1), PathPrefix: anthropic.String("/"),
		View: anthropic.BetaManagedAgentsMemoryViewBasic, Betas: betas, WorkspaceID: ws})
	must("list memories", err)

	versions, err := ms.MemoryVersions.List(ctx, st.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{Limit: anthropic.Int(1)})
	must("first versions page", err)
	if versions.NextPage == "" {
		t.Fatal("two versions, limit 1: no next_page")
	}
	_, err = ms.MemoryVersions.List(ctx, st.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{APIKeyID: anthropic.String("api_key_id"),
		CreatedAtGte: anthropic.Time(now.Add(-time.Hour)), CreatedAtLte: anthropic.Time(now.Add(time.Hour)), Limit: anthropic.Int(1), MemoryID: anthropic.String(m.ID),
		Operation: anthropic.BetaManagedAgentsMemoryVersionOperationCreated, Page: anthropic.String(versions.NextPage),
		ServiceAccountID: anthropic.String("service_account_id"), SessionID: anthropic.String("session_id"),
		View: anthropic.BetaManagedAgentsMemoryViewBasic, Betas: betas, WorkspaceID: ws})
	must("list versions", err)
	old := versions.Data[0].ID
	if old == u.MemoryVersionID {
		old = m.MemoryVersionID
	}
	_, err = ms.MemoryVersions.Get(ctx, old, anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: st.ID, View: anthropic.BetaManagedAgentsMemoryViewBasic, Betas: betas, WorkspaceID: ws})
	must("get version", err)
	_, err = ms.MemoryVersions.Redact(ctx, old, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: st.ID, Betas: betas, WorkspaceID: ws})
	must("redact version", err)
	_, err = ms.Memories.Delete(ctx, m.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: st.ID, ExpectedContentSha256: anthropic.String(sha("content 2")),
		Betas: betas, WorkspaceID: ws})
	must("delete memory", err)
	_, err = ms.Archive(ctx, st.ID, anthropic.BetaMemoryStoreArchiveParams{Betas: betas, WorkspaceID: ws})
	must("archive store", err)
	_, err = ms.Delete(ctx, st.ID, anthropic.BetaMemoryStoreDeleteParams{Betas: betas, WorkspaceID: ws})
	must("delete store", err)
}
