package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ExerciseSandboxes runs the SandboxStore contract. newStore must return a
// fresh, empty store for each call and arrange its Close with t.Cleanup.
// Sandboxes and backups carry tenant ids without a tenant row, so an engine
// must not tie them to the tenants table.
func ExerciseSandboxes(ctx context.Context, t *testing.T, newStore func(t *testing.T) store.SandboxStore) {
	t.Helper()
	groups := []struct {
		name  string
		cases []sandboxCase
	}{
		{"Sandboxes", sandboxCases},
		{"Backups", backupCases},
		{"SandboxRaces", sandboxRaceCases},
		{"SandboxTransitions", sandboxTransitionCases},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					c.fn(&sbEnv{ctx: ctx, t: t, s: newStore(t)})
				})
			}
		})
	}
}

type sandboxCase struct {
	name string
	fn   func(e *sbEnv)
}

type sbEnv struct {
	ctx context.Context
	t   *testing.T
	s   store.SandboxStore
	n   int
}

// sbEpoch is a fixed instant at microsecond precision (what Postgres keeps) in a
// zone that is not UTC, so engines must compare instants, not wall clocks.
var sbEpoch = time.Date(2031, 3, 4, 5, 6, 7, 123456000, time.FixedZone("UTC+2", 2*3600))

func sbAt(d time.Duration) time.Time { return sbEpoch.Add(d) }

func sbAtPtr(d time.Duration) *time.Time { return ptr(sbAt(d)) }

func (e *sbEnv) nextID(prefix string) string {
	e.n++
	return fmt.Sprintf("%s_test_%03d", prefix, e.n)
}

// create stores sb, giving it a fresh id when it has none.
func (e *sbEnv) create(sb store.Sandbox) *store.Sandbox {
	e.t.Helper()
	if sb.ID == "" {
		sb.ID = e.nextID("sbx")
	}
	out, err := e.s.CreateSandbox(e.ctx, &sb)
	if err != nil {
		e.t.Fatalf("CreateSandbox(%q): %v", sb.ID, err)
	}
	return out
}

func (e *sbEnv) get(id string) *store.Sandbox {
	e.t.Helper()
	sb, err := e.s.GetSandbox(e.ctx, id)
	if err != nil {
		e.t.Fatalf("GetSandbox(%q): %v", id, err)
	}
	return sb
}

func (e *sbEnv) list(p store.ListSandboxesParams) []string {
	e.t.Helper()
	sbs, err := e.s.ListSandboxes(e.ctx, p)
	if err != nil {
		e.t.Fatalf("ListSandboxes(%+v): %v", p, err)
	}
	out := []string{}
	for _, sb := range sbs {
		out = append(out, sb.ID)
	}
	return out
}

// fullSandbox has every field set to a non-zero value.
func fullSandbox(id string) store.Sandbox {
	return store.Sandbox{
		ID: id, TenantID: "tnt_a", Driver: "process", Image: "debian:13", Network: "none",
		Limits: json.RawMessage(`{"memory_mb":512,"pids":64,"cpus":1.5}`), SleepAfter: 90 * time.Second,
		Metadata: map[string]string{"owner": "ci", "purpose": "contract"}, Environment: "env_1", SessionKey: "sess_1",
		Node:      "node-1",
		Handle:    json.RawMessage(`{"pid":4242,"dir":"/var/lib/agentkernel/x"}`),
		StartedAt: sbAtPtr(time.Minute), WarmedAt: sbAtPtr(2 * time.Minute), StoppingAt: sbAtPtr(3 * time.Minute),
		DestroyedAt: sbAtPtr(4 * time.Minute), Generation: 7, LastActivityAt: sbAt(150 * time.Second),
		Version: 99, CreatedAt: sbAt(0), UpdatedAt: sbAt(30 * time.Second),
	}
}

// sameSandbox checks every field of got against want. Nil and empty Limits,
// Handle and Metadata are the same; time pointers must agree on nil.
func sameSandbox(t *testing.T, what string, got, want *store.Sandbox) {
	t.Helper()
	equal(t, what+" ID", got.ID, want.ID)
	equal(t, what+" TenantID", got.TenantID, want.TenantID)
	equal(t, what+" Driver", got.Driver, want.Driver)
	equal(t, what+" Image", got.Image, want.Image)
	equal(t, what+" Network", got.Network, want.Network)
	sbSameJSON(t, what+" Limits", got.Limits, want.Limits)
	equal(t, what+" SleepAfter", got.SleepAfter, want.SleepAfter)
	sbSameMetadata(t, what+" Metadata", got.Metadata, want.Metadata)
	equal(t, what+" Environment", got.Environment, want.Environment)
	equal(t, what+" SessionKey", got.SessionKey, want.SessionKey)
	equal(t, what+" Node", got.Node, want.Node)
	sbSameJSON(t, what+" Handle", got.Handle, want.Handle)
	sbSameTimePtr(t, what+" StartedAt", got.StartedAt, want.StartedAt)
	sbSameTimePtr(t, what+" WarmedAt", got.WarmedAt, want.WarmedAt)
	sbSameTimePtr(t, what+" StoppingAt", got.StoppingAt, want.StoppingAt)
	sbSameTimePtr(t, what+" DestroyedAt", got.DestroyedAt, want.DestroyedAt)
	equal(t, what+" Generation", got.Generation, want.Generation)
	sbSameTime(t, what+" LastActivityAt", got.LastActivityAt, want.LastActivityAt)
	equal(t, what+" Version", got.Version, want.Version)
	sbSameTime(t, what+" CreatedAt", got.CreatedAt, want.CreatedAt)
	sbSameTime(t, what+" UpdatedAt", got.UpdatedAt, want.UpdatedAt)
}

func sbSameJSON(t *testing.T, what string, got, want json.RawMessage) {
	t.Helper()
	if len(want) == 0 {
		if len(got) != 0 {
			t.Fatalf("%s: got %s, want nil", what, got)
		}
		return
	}
	jsonEq(t, what, got, string(want))
}

func sbSameMetadata(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func sbSameTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func sbSameTimePtr(t *testing.T, what string, got, want *time.Time) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Fatalf("%s: got %v, want %v", what, got, want)
	default:
		sbSameTime(t, what, *got, *want)
	}
}

var sandboxCases = []sandboxCase{
	{"CreateGetRoundTrip", testSandboxRoundTrip},
	{"CreateDefaults", testSandboxDefaults},
	{"CreateDuplicateID", testSandboxDuplicate},
	{"CreateInvalid", testSandboxInvalid},
	{"UpdateWritesEveryMutableField", testSandboxUpdate},
	{"UpdateStaleVersionWritesNothing", testSandboxUpdateStale},
	{"TouchDoesNotBumpVersion", testSandboxTouch},
	{"List", testSandboxList},
	{"ListScopedToTenant", testSandboxListTenant},
	{"ListPages", testSandboxListPages},
	{"ListRunning", testSandboxListRunning},
	{"ListNode", testSandboxListNode},
	{"DeleteKeepsBackups", testSandboxDelete},
}

func testSandboxRoundTrip(e *sbEnv) {
	in := fullSandbox("sbx_full")
	out, err := e.s.CreateSandbox(e.ctx, &in)
	mustOK(e.t, err, "CreateSandbox")
	want := fullSandbox("sbx_full")
	want.Version = 1 // the store starts every sandbox at 1, whatever the caller sent
	sameSandbox(e.t, "created", out, &want)
	sameSandbox(e.t, "read back", e.get("sbx_full"), &want)
	equal(e.t, "caller's Version after create", in.Version, int64(99))
}

// testSandboxDefaults pins what the store fills in: an id, the creation
// time, UpdatedAt and LastActivityAt equal to CreatedAt; a JSON null Handle
// is no handle.
func testSandboxDefaults(e *sbEnv) {
	sb, err := e.s.CreateSandbox(e.ctx, &store.Sandbox{TenantID: "tnt_a", Handle: json.RawMessage("null")})
	mustOK(e.t, err, "CreateSandbox with only a tenant")
	if sb.ID == "" {
		e.t.Fatal("CreateSandbox did not generate an id")
	}
	if sb.CreatedAt.IsZero() {
		e.t.Fatal("CreateSandbox left CreatedAt zero")
	}
	want := store.Sandbox{ID: sb.ID, TenantID: "tnt_a", Version: 1,
		CreatedAt: sb.CreatedAt, UpdatedAt: sb.CreatedAt, LastActivityAt: sb.CreatedAt}
	sameSandbox(e.t, "created", sb, &want)
	got := e.get(sb.ID)
	sameSandbox(e.t, "read back", got, &want)
	if got.Handle != nil || got.Limits != nil {
		e.t.Fatalf("unset Handle/Limits read back as %q/%q, want nil", got.Handle, got.Limits)
	}
	if got.StartedAt != nil || got.WarmedAt != nil || got.StoppingAt != nil || got.DestroyedAt != nil {
		e.t.Fatalf("unset fact times read back non-nil: %+v", got)
	}

	withCreated := e.create(store.Sandbox{TenantID: "tnt_a", CreatedAt: sbAt(0)})
	sbSameTime(e.t, "given CreatedAt", withCreated.CreatedAt, sbAt(0))
	sbSameTime(e.t, "UpdatedAt defaults to CreatedAt", withCreated.UpdatedAt, sbAt(0))
	sbSameTime(e.t, "LastActivityAt defaults to CreatedAt", withCreated.LastActivityAt, sbAt(0))

	_, err = e.s.GetSandbox(e.ctx, "sbx_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetSandbox(unknown)")
}

func testSandboxDuplicate(e *sbEnv) {
	first := e.create(store.Sandbox{ID: "sbx_dup", TenantID: "tnt_a", Image: "first"})
	_, err := e.s.CreateSandbox(e.ctx, &store.Sandbox{ID: "sbx_dup", TenantID: "tnt_b", Image: "second"})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CreateSandbox with a taken id")
	sameSandbox(e.t, "sandbox after the failed create", e.get("sbx_dup"), first)
}

func testSandboxInvalid(e *sbEnv) {
	for name, sb := range map[string]store.Sandbox{
		"Limits not JSON":     {ID: "sbx_bad1", Limits: json.RawMessage(`{"memory_mb":`)},
		"Handle not JSON":     {ID: "sbx_bad2", Handle: json.RawMessage(`pid=1`)},
		"SleepAfter negative": {ID: "sbx_bad3", SleepAfter: -time.Second},
	} {
		_, err := e.s.CreateSandbox(e.ctx, &sb)
		mustErrIs(e.t, err, store.ErrInvalid, "CreateSandbox with "+name)
		_, err = e.s.GetSandbox(e.ctx, sb.ID)
		mustErrIs(e.t, err, store.ErrNotFound, "GetSandbox after rejected create with "+name)
	}
	sb := e.create(store.Sandbox{TenantID: "tnt_a"})
	bad := *sb
	bad.Handle = json.RawMessage(`{"pid"`)
	_, err := e.s.UpdateSandbox(e.ctx, &bad)
	mustErrIs(e.t, err, store.ErrInvalid, "UpdateSandbox with Handle not JSON")
	sameSandbox(e.t, "sandbox after rejected update", e.get(sb.ID), sb)
}

func testSandboxUpdate(e *sbEnv) {
	// Created in the past so the store's clock is after it.
	past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	sb := e.create(store.Sandbox{ID: "sbx_u", TenantID: "tnt_a", Driver: "process", Image: "old",
		CreatedAt: past, UpdatedAt: past, LastActivityAt: past})

	next := fullSandbox("sbx_u")
	next.TenantID = "tnt_thief" // not mutable
	next.CreatedAt = sbAt(time.Hour)
	next.UpdatedAt = sbAt(time.Hour) // the store sets it
	next.Version = sb.Version
	out, err := e.s.UpdateSandbox(e.ctx, &next)
	mustOK(e.t, err, "UpdateSandbox")
	want := fullSandbox("sbx_u")
	want.Version = 2
	want.CreatedAt = past
	want.UpdatedAt = out.UpdatedAt
	sameSandbox(e.t, "updated", out, &want)
	sameSandbox(e.t, "read back after update", e.get("sbx_u"), &want)
	if !out.UpdatedAt.After(past) || out.UpdatedAt.Equal(sbAt(time.Hour)) {
		e.t.Fatalf("UpdatedAt = %v: want the store's clock (after %v), not the caller's %v", out.UpdatedAt, past, sbAt(time.Hour))
	}

	// Clearing: nil handle, nil fact times and empty metadata read back so.
	cleared := *out
	cleared.Handle, cleared.Limits, cleared.Metadata = nil, nil, map[string]string{}
	cleared.StartedAt, cleared.WarmedAt, cleared.StoppingAt, cleared.DestroyedAt = nil, nil, nil, nil
	cleared.Generation, cleared.SleepAfter, cleared.Node = 0, 0, ""
	out2, err := e.s.UpdateSandbox(e.ctx, &cleared)
	mustOK(e.t, err, "UpdateSandbox clearing fields")
	want2 := cleared
	want2.Version, want2.UpdatedAt = 3, out2.UpdatedAt
	sameSandbox(e.t, "cleared", out2, &want2)
	got := e.get("sbx_u")
	sameSandbox(e.t, "read back after clearing", got, &want2)
	if got.Handle != nil {
		e.t.Fatalf("cleared Handle read back as %q, want nil", got.Handle)
	}
	if out2.UpdatedAt.Before(out.UpdatedAt) {
		e.t.Fatalf("UpdatedAt went backwards: %v then %v", out.UpdatedAt, out2.UpdatedAt)
	}

	missing := fullSandbox("sbx_missing")
	missing.Version = 1
	_, err = e.s.UpdateSandbox(e.ctx, &missing)
	mustErrIs(e.t, err, store.ErrNotFound, "UpdateSandbox(unknown)")
}

func testSandboxUpdateStale(e *sbEnv) {
	sb := e.create(store.Sandbox{ID: "sbx_s", TenantID: "tnt_a", Image: "v1"})
	v2 := *sb
	v2.Image = "v2"
	cur, err := e.s.UpdateSandbox(e.ctx, &v2)
	mustOK(e.t, err, "UpdateSandbox")
	for _, version := range []int64{sb.Version, cur.Version + 5, 0} {
		stale := fullSandbox("sbx_s")
		stale.Version = version
		_, err := e.s.UpdateSandbox(e.ctx, &stale)
		mustErrIs(e.t, err, store.ErrVersionMismatch, fmt.Sprintf("UpdateSandbox at version %d (stored %d)", version, cur.Version))
		sameSandbox(e.t, "sandbox after a stale update", e.get("sbx_s"), cur)
	}
}

func testSandboxTouch(e *sbEnv) {
	sb := e.create(store.Sandbox{ID: "sbx_t", TenantID: "tnt_a", Image: "img", LastActivityAt: sbAt(0)})
	mustOK(e.t, e.s.TouchSandbox(e.ctx, "sbx_t", sbAt(time.Minute)), "TouchSandbox")
	want := *sb
	want.LastActivityAt = sbAt(time.Minute)
	sameSandbox(e.t, "touched", e.get("sbx_t"), &want)

	// An update from a read taken before the touch still wins.
	upd := *sb
	upd.Image = "img2"
	upd.LastActivityAt = sbAt(2 * time.Minute)
	mustOK(e.t, e.s.TouchSandbox(e.ctx, "sbx_t", sbAt(90*time.Second)), "TouchSandbox")
	out, err := e.s.UpdateSandbox(e.ctx, &upd)
	mustOK(e.t, err, "UpdateSandbox after a touch, at the version read before it")
	equal(e.t, "Version after update", out.Version, int64(2))
	mustOK(e.t, e.s.TouchSandbox(e.ctx, "sbx_t", sbAt(3*time.Minute)), "TouchSandbox")
	got := e.get("sbx_t")
	equal(e.t, "Version after touch", got.Version, int64(2))
	sbSameTime(e.t, "LastActivityAt after touch", got.LastActivityAt, sbAt(3*time.Minute))
	sbSameTime(e.t, "UpdatedAt after touch", got.UpdatedAt, out.UpdatedAt)
	equal(e.t, "Image after touch", got.Image, "img2")

	mustErrIs(e.t, e.s.TouchSandbox(e.ctx, "sbx_missing", sbAt(0)), store.ErrNotFound, "TouchSandbox(unknown)")
}

func testSandboxList(e *sbEnv) {
	// Created out of id order, so the listing must sort.
	for _, id := range []string{"sbx_c", "sbx_a", "sbx_d", "sbx_b"} {
		e.create(store.Sandbox{ID: id, TenantID: "tnt_a"})
	}
	e.create(store.Sandbox{ID: "sbx_x", TenantID: "tnt_a", DestroyedAt: sbAtPtr(0)})
	live := e.get("sbx_d")
	live.DestroyedAt = sbAtPtr(time.Minute)
	_, err := e.s.UpdateSandbox(e.ctx, live)
	mustOK(e.t, err, "UpdateSandbox destroying sbx_d")

	sbEqualIDs(e.t, "live", e.list(store.ListSandboxesParams{TenantID: "tnt_a"}), "sbx_a", "sbx_b", "sbx_c")
	sbEqualIDs(e.t, "with destroyed", e.list(store.ListSandboxesParams{TenantID: "tnt_a", IncludeDestroyed: true}),
		"sbx_a", "sbx_b", "sbx_c", "sbx_d", "sbx_x")
	sbEqualIDs(e.t, "unknown tenant", e.list(store.ListSandboxesParams{TenantID: "tnt_nobody"}))
}

func testSandboxListTenant(e *sbEnv) {
	e.create(store.Sandbox{ID: "sbx_1", TenantID: "tnt_a"})
	e.create(store.Sandbox{ID: "sbx_2", TenantID: "tnt_b"})
	e.create(store.Sandbox{ID: "sbx_3", TenantID: "tnt_a"})
	e.create(store.Sandbox{ID: "sbx_4", TenantID: "tnt_b", DestroyedAt: sbAtPtr(0)})
	e.create(store.Sandbox{ID: "sbx_5", TenantID: "tnt_c"})

	sbEqualIDs(e.t, "tenant a", e.list(store.ListSandboxesParams{TenantID: "tnt_a"}), "sbx_1", "sbx_3")
	sbEqualIDs(e.t, "tenant b", e.list(store.ListSandboxesParams{TenantID: "tnt_b"}), "sbx_2")
	sbEqualIDs(e.t, "tenant b with destroyed", e.list(store.ListSandboxesParams{TenantID: "tnt_b", IncludeDestroyed: true}),
		"sbx_2", "sbx_4")
	// The reaper and recovery list every tenant's sandboxes.
	sbEqualIDs(e.t, "all tenants", e.list(store.ListSandboxesParams{}), "sbx_1", "sbx_2", "sbx_3", "sbx_5")
	sbEqualIDs(e.t, "all tenants with destroyed", e.list(store.ListSandboxesParams{IncludeDestroyed: true}),
		"sbx_1", "sbx_2", "sbx_3", "sbx_4", "sbx_5")
	sbEqualIDs(e.t, "tenant a after sbx_1", e.list(store.ListSandboxesParams{TenantID: "tnt_a", AfterID: "sbx_1"}), "sbx_3")
}

func testSandboxListPages(e *sbEnv) {
	var all []string
	for i := range 7 {
		id := fmt.Sprintf("sbx_p%02d", 7-i)
		e.create(store.Sandbox{ID: id, TenantID: "tnt_a"})
		all = append([]string{id}, all...)
	}
	e.create(store.Sandbox{ID: "sbx_p99", TenantID: "tnt_b"})
	var paged []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > len(all) {
			e.t.Fatalf("paging did not end: %v", paged)
		}
		page := e.list(store.ListSandboxesParams{TenantID: "tnt_a", AfterID: after, Limit: 3})
		if len(page) > 3 {
			e.t.Fatalf("page of %d with Limit 3: %v", len(page), page)
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		after = page[len(page)-1]
	}
	sbEqualIDs(e.t, "paged", paged, all...)
	// The cursor is a position in id order; it need not name a sandbox.
	sbEqualIDs(e.t, "after a gap", e.list(store.ListSandboxesParams{TenantID: "tnt_a", AfterID: "sbx_p04x", Limit: 2}),
		"sbx_p05", "sbx_p06")
}

func sbEqualIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func testSandboxDelete(e *sbEnv) {
	sb := e.create(store.Sandbox{ID: "sbx_del", TenantID: "tnt_a", Environment: "env", SessionKey: "key"})
	b := e.backup(store.Backup{ID: "bkp_del", TenantID: "tnt_a", Environment: "env", SessionKey: "key",
		SandboxID: sb.ID, CreatedAt: sbAt(0), ExpiresAt: sbAt(time.Hour)})

	mustOK(e.t, e.s.DeleteSandbox(e.ctx, sb.ID), "DeleteSandbox")
	_, err := e.s.GetSandbox(e.ctx, sb.ID)
	mustErrIs(e.t, err, store.ErrNotFound, "GetSandbox after delete")
	mustErrIs(e.t, e.s.DeleteSandbox(e.ctx, sb.ID), store.ErrNotFound, "DeleteSandbox twice")
	sbEqualIDs(e.t, "list after delete", e.list(store.ListSandboxesParams{IncludeDestroyed: true}))

	// Backups live until their TTL, so a recreated sandbox restores.
	got, err := e.s.GetBackup(e.ctx, b.ID)
	mustOK(e.t, err, "GetBackup after its sandbox was deleted")
	sameBackup(e.t, "backup after sandbox delete", got, b)
	latest, err := e.s.LatestBackup(e.ctx, store.BackupKey{TenantID: "tnt_a", Environment: "env", SessionKey: "key"}, sbAt(0))
	mustOK(e.t, err, "LatestBackup after its sandbox was deleted")
	equal(e.t, "latest backup", latest.ID, b.ID)
	sbEqualIDs(e.t, "ListBackups after sandbox delete", e.listBackupIDs(sb.ID), b.ID)
}

// testSandboxListRunning: Running lists the sandboxes with a handle or a
// stop in progress, not the cold ones (nor destroyed ones, unless asked).
func testSandboxListRunning(e *sbEnv) {
	e.create(store.Sandbox{ID: "sbx_cold", TenantID: "tnt_a"})
	e.create(store.Sandbox{ID: "sbx_run", TenantID: "tnt_a", Handle: json.RawMessage(`{"pid":1}`), StartedAt: sbAtPtr(0)})
	e.create(store.Sandbox{ID: "sbx_warm", TenantID: "tnt_b", Handle: json.RawMessage(`{"pid":2}`), StartedAt: sbAtPtr(0),
		WarmedAt: sbAtPtr(time.Second)})
	e.create(store.Sandbox{ID: "sbx_stop", TenantID: "tnt_a", StoppingAt: sbAtPtr(0)})
	e.create(store.Sandbox{ID: "sbx_gone", TenantID: "tnt_a", Handle: json.RawMessage(`{"pid":3}`), DestroyedAt: sbAtPtr(0)})
	sbEqualIDs(e.t, "running", e.list(store.ListSandboxesParams{Running: true}), "sbx_run", "sbx_stop", "sbx_warm")
	sbEqualIDs(e.t, "running of tenant a", e.list(store.ListSandboxesParams{TenantID: "tnt_a", Running: true}), "sbx_run", "sbx_stop")
	sbEqualIDs(e.t, "running with destroyed", e.list(store.ListSandboxesParams{Running: true, IncludeDestroyed: true}),
		"sbx_gone", "sbx_run", "sbx_stop", "sbx_warm")
	sbEqualIDs(e.t, "all", e.list(store.ListSandboxesParams{}), "sbx_cold", "sbx_run", "sbx_stop", "sbx_warm")
}

// testSandboxListNode: Node lists one node's sandboxes (with Running, the
// ones that node's reaper and recovery look at); an update moves a sandbox
// to another node (a takeover of a dead node's row).
func testSandboxListNode(e *sbEnv) {
	run := json.RawMessage(`{"pid":1}`)
	e.create(store.Sandbox{ID: "sbx_a_cold", TenantID: "tnt_a", Node: "node-a"})
	e.create(store.Sandbox{ID: "sbx_a_run", TenantID: "tnt_a", Node: "node-a", Handle: run})
	e.create(store.Sandbox{ID: "sbx_a_stop", TenantID: "tnt_b", Node: "node-a", StoppingAt: sbAtPtr(0)})
	e.create(store.Sandbox{ID: "sbx_a_gone", TenantID: "tnt_a", Node: "node-a", Handle: run, DestroyedAt: sbAtPtr(0)})
	e.create(store.Sandbox{ID: "sbx_b_run", TenantID: "tnt_a", Node: "node-b", Handle: run})
	e.create(store.Sandbox{ID: "sbx_none_run", TenantID: "tnt_a", Handle: run})

	equal(e.t, "Node read back", e.get("sbx_a_run").Node, "node-a")
	equal(e.t, "Node of a sandbox created without one", e.get("sbx_none_run").Node, "")
	sbEqualIDs(e.t, "node a", e.list(store.ListSandboxesParams{Node: "node-a"}), "sbx_a_cold", "sbx_a_run", "sbx_a_stop")
	sbEqualIDs(e.t, "node a running", e.list(store.ListSandboxesParams{Node: "node-a", Running: true}),
		"sbx_a_run", "sbx_a_stop")
	sbEqualIDs(e.t, "node a running with destroyed",
		e.list(store.ListSandboxesParams{Node: "node-a", Running: true, IncludeDestroyed: true}),
		"sbx_a_gone", "sbx_a_run", "sbx_a_stop")
	sbEqualIDs(e.t, "node a running of tenant a",
		e.list(store.ListSandboxesParams{Node: "node-a", Running: true, TenantID: "tnt_a"}), "sbx_a_run")
	sbEqualIDs(e.t, "node a after sbx_a_cold, one",
		e.list(store.ListSandboxesParams{Node: "node-a", AfterID: "sbx_a_cold", Limit: 1}), "sbx_a_run")
	sbEqualIDs(e.t, "node b running", e.list(store.ListSandboxesParams{Node: "node-b", Running: true}), "sbx_b_run")
	sbEqualIDs(e.t, "unknown node", e.list(store.ListSandboxesParams{Node: "node-z"}))
	sbEqualIDs(e.t, "every node's running", e.list(store.ListSandboxesParams{Running: true}),
		"sbx_a_run", "sbx_a_stop", "sbx_b_run", "sbx_none_run")

	// Node b takes over node a's running sandbox.
	moved := e.get("sbx_a_run")
	moved.Node = "node-b"
	out, err := e.s.UpdateSandbox(e.ctx, moved)
	mustOK(e.t, err, "UpdateSandbox moving sbx_a_run to node b")
	equal(e.t, "Node after the move", out.Node, "node-b")
	equal(e.t, "Node read back after the move", e.get("sbx_a_run").Node, "node-b")
	sbEqualIDs(e.t, "node a running after the move", e.list(store.ListSandboxesParams{Node: "node-a", Running: true}),
		"sbx_a_stop")
	sbEqualIDs(e.t, "node b running after the move", e.list(store.ListSandboxesParams{Node: "node-b", Running: true}),
		"sbx_a_run", "sbx_b_run")
}
