package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ExerciseObjects runs the ObjectStore contract (durable objects, seed 002).
// newStore must return a fresh, empty store for each call and arrange its
// Close with t.Cleanup. Objects carry tenant ids without a tenant row.
//
// Every case that changes storage checks afterwards that the object's
// StorageKeys and StorageBytes equal what GetObjectStorage returns: the
// runtime enforces the storage limits from those totals alone.
func ExerciseObjects(ctx context.Context, t *testing.T, newStore func(t *testing.T) store.ObjectStore) {
	t.Helper()
	groups := []struct {
		name  string
		cases []objCase
	}{
		{"Objects", objectCases},
		{"ObjectStorage", objStorageCases},
		{"ObjectClasses", objClassCases},
		{"ObjectBundles", objBundleCases},
		{"Alarms", objAlarmCases},
		{"Audit", objAuditCases},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					c.fn(&objEnv{ctx: ctx, t: t, s: newStore(t)})
				})
			}
		})
	}
}

type objCase struct {
	name string
	fn   func(e *objEnv)
}

type objEnv struct {
	ctx context.Context
	t   *testing.T
	s   store.ObjectStore
}

// objEpoch is a fixed instant at microsecond precision in a zone that is
// not UTC, so engines must compare instants, not wall clocks.
var objEpoch = time.Date(2032, 5, 6, 7, 8, 9, 654321000, time.FixedZone("UTC-5", -5*3600))

func objAt(d time.Duration) time.Time { return objEpoch.Add(d) }

func objKey(tenant, class, id string) store.ObjectKey {
	return store.ObjectKey{TenantID: tenant, Class: class, ID: id}
}

func (e *objEnv) create(k store.ObjectKey) *store.Object {
	e.t.Helper()
	o, err := e.s.CreateObject(e.ctx, &store.Object{ObjectKey: k, SandboxID: "sbx_" + k.ID})
	if err != nil {
		e.t.Fatalf("CreateObject(%v): %v", k, err)
	}
	return o
}

func (e *objEnv) get(k store.ObjectKey) *store.Object {
	e.t.Helper()
	o, err := e.s.GetObject(e.ctx, k)
	if err != nil {
		e.t.Fatalf("GetObject(%v): %v", k, err)
	}
	return o
}

// storage returns the object's storage as strings, byte for byte.
func (e *objEnv) storage(k store.ObjectKey) map[string]string {
	e.t.Helper()
	st, err := e.s.GetObjectStorage(e.ctx, k)
	if err != nil {
		e.t.Fatalf("GetObjectStorage(%v): %v", k, err)
	}
	if st == nil {
		e.t.Fatalf("GetObjectStorage(%v) returned a nil map", k)
	}
	out := make(map[string]string, len(st))
	for key, v := range st {
		out[key] = string(v)
	}
	return out
}

// checkStorage asserts the object's storage is exactly want (byte for byte)
// and that its totals match it, and returns the object.
func (e *objEnv) checkStorage(what string, k store.ObjectKey, want map[string]string) *store.Object {
	e.t.Helper()
	got := e.storage(k)
	if want == nil {
		want = map[string]string{}
	}
	if !maps.Equal(got, want) {
		e.t.Fatalf("%s: storage of %v = %v, want %v", what, k, got, want)
	}
	return e.checkTotals(what, k)
}

// checkTotals asserts StorageKeys/StorageBytes equal the real storage:
// keys counted, bytes = sum of len(key)+len(value).
func (e *objEnv) checkTotals(what string, k store.ObjectKey) *store.Object {
	e.t.Helper()
	st := e.storage(k)
	var size int64
	for key, v := range st {
		size += int64(len(key) + len(v))
	}
	o := e.get(k)
	if o.StorageKeys != int64(len(st)) || o.StorageBytes != size {
		e.t.Fatalf("%s: totals of %v are %d keys/%d bytes, storage holds %d keys/%d bytes",
			what, k, o.StorageKeys, o.StorageBytes, len(st), size)
	}
	return o
}

func (e *objEnv) apply(k store.ObjectKey, writes ...store.StorageWrite) *store.Object {
	e.t.Helper()
	o, err := e.s.ApplyStorageWrites(e.ctx, k, writes)
	if err != nil {
		e.t.Fatalf("ApplyStorageWrites(%v): %v", k, err)
	}
	return o
}

func objSet(key, value string) store.StorageWrite {
	return store.StorageWrite{Key: key, Value: json.RawMessage(value)}
}

func objDel(key string) store.StorageWrite { return store.StorageWrite{Key: key, Delete: true} }

func objStorage(kv ...string) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = json.RawMessage(kv[i+1])
	}
	return m
}

func objSameTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	if got.Location() != time.UTC {
		t.Fatalf("%s: %v is not in UTC", what, got)
	}
}

func objSameTimePtr(t *testing.T, what string, got, want *time.Time) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Fatalf("%s: got %v, want %v", what, got, want)
	default:
		objSameTime(t, what, *got, *want)
	}
}

// sameObject compares every field.
func sameObject(t *testing.T, what string, got, want *store.Object) {
	t.Helper()
	equal(t, what+" key", got.ObjectKey, want.ObjectKey)
	equal(t, what+" Status", got.Status, want.Status)
	equal(t, what+" SandboxID", got.SandboxID, want.SandboxID)
	equal(t, what+" StorageKeys", got.StorageKeys, want.StorageKeys)
	equal(t, what+" StorageBytes", got.StorageBytes, want.StorageBytes)
	equal(t, what+" Version", got.Version, want.Version)
	objSameTimePtr(t, what+" LastCallAt", got.LastCallAt, want.LastCallAt)
	objSameTimePtr(t, what+" HibernatedAt", got.HibernatedAt, want.HibernatedAt)
	objSameTime(t, what+" CreatedAt", got.CreatedAt, want.CreatedAt)
	objSameTime(t, what+" UpdatedAt", got.UpdatedAt, want.UpdatedAt)
}

var objectCases = []objCase{
	{"CreateGetRoundTrip", testObjRoundTrip},
	{"CreateDefaultsAndInvalid", testObjDefaults},
	{"CreateExactlyOneWins", testObjCreateRace},
	{"TenantScoped", testObjTenantScoped},
	{"SetActive", testObjSetActive},
	{"TouchDoesNotBumpVersion", testObjTouch},
	{"ListFiltersAndPages", testObjList},
	{"DeleteRemovesStorageAndAlarms", testObjDelete},
}

func testObjRoundTrip(e *objEnv) {
	k := objKey("tnt_a", "counter", "user-1")
	in := store.Object{ObjectKey: k, Status: store.ObjectHibernating, SandboxID: "sbx_1", StorageKeys: 5,
		StorageBytes: 500, Version: 9, LastCallAt: ptr(objAt(time.Minute)), HibernatedAt: ptr(objAt(0)),
		CreatedAt: objAt(0), UpdatedAt: objAt(time.Second)}
	out, err := e.s.CreateObject(e.ctx, &in)
	mustOK(e.t, err, "CreateObject")
	// The store starts every object Active at version 1 with empty storage,
	// whatever the caller sent.
	want := &store.Object{ObjectKey: k, Status: store.ObjectActive, SandboxID: "sbx_1", Version: 1,
		LastCallAt: ptr(objAt(time.Minute)), CreatedAt: objAt(0), UpdatedAt: objAt(time.Second)}
	sameObject(e.t, "created", out, want)
	sameObject(e.t, "read back", e.get(k), want)
	e.checkStorage("new object", k, nil)
}

func testObjDefaults(e *objEnv) {
	k := objKey("", "counter", "internal")
	o, err := e.s.CreateObject(e.ctx, &store.Object{ObjectKey: k})
	mustOK(e.t, err, "CreateObject with only a key (tenant '')")
	if o.CreatedAt.IsZero() {
		e.t.Fatal("CreateObject left CreatedAt zero")
	}
	sameObject(e.t, "read back", e.get(k), &store.Object{ObjectKey: k, Status: store.ObjectActive, Version: 1,
		CreatedAt: o.CreatedAt, UpdatedAt: o.CreatedAt})

	_, err = e.s.GetObject(e.ctx, objKey("", "counter", "missing"))
	mustErrIs(e.t, err, store.ErrNotFound, "GetObject(unknown)")
	_, err = e.s.GetObject(e.ctx, objKey("tnt_other", "counter", "internal"))
	mustErrIs(e.t, err, store.ErrNotFound, "GetObject under another tenant")
	for _, bad := range []store.ObjectKey{objKey("t", "", "id"), objKey("t", "counter", "")} {
		_, err := e.s.CreateObject(e.ctx, &store.Object{ObjectKey: bad})
		mustErrIs(e.t, err, store.ErrInvalid, fmt.Sprintf("CreateObject(%+v)", bad))
	}
}

func testObjCreateRace(e *objEnv) {
	const n = 50
	k := objKey("tnt_a", "counter", "race")
	errs := make([]error, n)
	race(n, func(i int) {
		_, errs[i] = e.s.CreateObject(e.ctx, &store.Object{ObjectKey: k, SandboxID: fmt.Sprintf("sbx_%d", i)})
	})
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				e.t.Fatalf("creators %d and %d both created %v", winner, i, k)
			}
			winner = i
		case !errors.Is(err, store.ErrAlreadyExists):
			e.t.Fatalf("creator %d: got %v, want nil or ErrAlreadyExists", i, err)
		}
	}
	if winner < 0 {
		e.t.Fatal("no creator won")
	}
	o := e.get(k)
	equal(e.t, "SandboxID", o.SandboxID, fmt.Sprintf("sbx_%d", winner))
	equal(e.t, "Version", o.Version, int64(1))
}

func testObjTenantScoped(e *objEnv) {
	a, b := objKey("tnt_a", "counter", "same"), objKey("tnt_b", "counter", "same")
	e.create(a)
	e.create(b)
	e.apply(a, objSet("n", "1"))
	e.apply(b, objSet("n", "2"), objSet("m", "3"))
	e.checkStorage("tenant a", a, map[string]string{"n": "1"})
	e.checkStorage("tenant b", b, map[string]string{"n": "2", "m": "3"})
	mustOK(e.t, e.s.DeleteObject(e.ctx, a), "DeleteObject(tenant a)")
	_, err := e.s.GetObject(e.ctx, a)
	mustErrIs(e.t, err, store.ErrNotFound, "GetObject(tenant a) after delete")
	e.checkStorage("tenant b after tenant a's delete", b, map[string]string{"n": "2", "m": "3"})
}

func testObjSetActive(e *objEnv) {
	k := objKey("tnt_a", "counter", "wake")
	e.create(k)
	e.apply(k, objSet("n", "1"))
	h, err := e.s.HibernateObject(e.ctx, k, objStorage("n", "41"))
	mustOK(e.t, err, "HibernateObject")

	o, err := e.s.SetObjectActive(e.ctx, k, "sbx_new")
	mustOK(e.t, err, "SetObjectActive")
	want := *h
	want.Status, want.SandboxID, want.Version, want.HibernatedAt, want.UpdatedAt =
		store.ObjectActive, "sbx_new", h.Version+1, nil, o.UpdatedAt
	sameObject(e.t, "woken", o, &want)
	sameObject(e.t, "read back", e.get(k), &want)
	if o.UpdatedAt.Before(h.UpdatedAt) {
		e.t.Fatalf("UpdatedAt went backwards: %v then %v", h.UpdatedAt, o.UpdatedAt)
	}
	e.checkStorage("after wake", k, map[string]string{"n": "41"})

	again, err := e.s.SetObjectActive(e.ctx, k, "sbx_newer")
	mustOK(e.t, err, "SetObjectActive on an Active object")
	equal(e.t, "Status", again.Status, store.ObjectActive)
	equal(e.t, "SandboxID", again.SandboxID, "sbx_newer")
	equal(e.t, "Version", again.Version, o.Version+1)

	_, err = e.s.SetObjectActive(e.ctx, objKey("tnt_a", "counter", "missing"), "sbx")
	mustErrIs(e.t, err, store.ErrNotFound, "SetObjectActive(unknown)")
}

func testObjTouch(e *objEnv) {
	k := objKey("tnt_a", "counter", "touch")
	o := e.create(k)
	mustOK(e.t, e.s.TouchObject(e.ctx, k, objAt(time.Hour)), "TouchObject")
	want := *o
	want.LastCallAt = ptr(objAt(time.Hour))
	sameObject(e.t, "touched", e.get(k), &want)
	// An earlier time is stored as given: it records what the caller saw.
	mustOK(e.t, e.s.TouchObject(e.ctx, k, objAt(time.Minute)), "TouchObject earlier")
	objSameTimePtr(e.t, "LastCallAt", e.get(k).LastCallAt, ptr(objAt(time.Minute)))
	mustErrIs(e.t, e.s.TouchObject(e.ctx, objKey("tnt_a", "counter", "missing"), objAt(0)), store.ErrNotFound,
		"TouchObject(unknown)")
}

func (e *objEnv) list(p store.ListObjectsParams) []string {
	e.t.Helper()
	objs, err := e.s.ListObjects(e.ctx, p)
	if err != nil {
		e.t.Fatalf("ListObjects(%+v): %v", p, err)
	}
	out := []string{}
	for _, o := range objs {
		out = append(out, o.TenantID+":"+o.Class+"/"+o.ID)
	}
	return out
}

func objSameList(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func testObjList(e *objEnv) {
	// Created out of order, so the listing must sort.
	for _, k := range []store.ObjectKey{objKey("a", "timer", "1"), objKey("a", "counter", "b"),
		objKey("b", "counter", "a"), objKey("a", "counter", "a"), objKey("a", "counter", "c/d")} {
		e.create(k)
	}
	_, err := e.s.HibernateObject(e.ctx, objKey("a", "counter", "b"), nil)
	mustOK(e.t, err, "HibernateObject")

	objSameList(e.t, "tenant a", e.list(store.ListObjectsParams{TenantID: "a"}),
		"a:counter/a", "a:counter/b", "a:counter/c/d", "a:timer/1")
	objSameList(e.t, "tenant a, class counter", e.list(store.ListObjectsParams{TenantID: "a", Class: "counter"}),
		"a:counter/a", "a:counter/b", "a:counter/c/d")
	objSameList(e.t, "tenant a, Active", e.list(store.ListObjectsParams{TenantID: "a", Status: store.ObjectActive}),
		"a:counter/a", "a:counter/c/d", "a:timer/1")
	objSameList(e.t, "Hibernating, every tenant", e.list(store.ListObjectsParams{Status: store.ObjectHibernating}),
		"a:counter/b")
	objSameList(e.t, "every tenant", e.list(store.ListObjectsParams{}),
		"a:counter/a", "b:counter/a", "a:counter/b", "a:counter/c/d", "a:timer/1")
	objSameList(e.t, "unknown tenant", e.list(store.ListObjectsParams{TenantID: "nobody"}))

	// Paging: the cursor is "class/id" and need not name an object; ids may
	// hold slashes.
	var paged []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			e.t.Fatalf("paging did not end: %v", paged)
		}
		objs, err := e.s.ListObjects(e.ctx, store.ListObjectsParams{TenantID: "a", AfterID: after, Limit: 2})
		mustOK(e.t, err, "ListObjects page")
		if len(objs) > 2 {
			e.t.Fatalf("page of %d with Limit 2", len(objs))
		}
		if len(objs) == 0 {
			break
		}
		for _, o := range objs {
			paged = append(paged, o.TenantID+":"+o.Class+"/"+o.ID)
		}
		last := objs[len(objs)-1]
		after = last.Class + "/" + last.ID
	}
	objSameList(e.t, "paged", paged, "a:counter/a", "a:counter/b", "a:counter/c/d", "a:timer/1")
	objSameList(e.t, "after a gap", e.list(store.ListObjectsParams{TenantID: "a", AfterID: "counter/bb"}),
		"a:counter/c/d", "a:timer/1")
	objSameList(e.t, "after c/d", e.list(store.ListObjectsParams{TenantID: "a", AfterID: "counter/c/d"}), "a:timer/1")
	_, err = e.s.ListObjects(e.ctx, store.ListObjectsParams{AfterID: "no-slash"})
	mustErrIs(e.t, err, store.ErrInvalid, "ListObjects with a cursor without a slash")
}

func testObjDelete(e *objEnv) {
	k, other := objKey("tnt_a", "counter", "del"), objKey("tnt_a", "counter", "keep")
	e.create(k)
	e.create(other)
	e.apply(k, objSet("n", "1"))
	e.apply(other, objSet("n", "2"))
	for _, key := range []store.ObjectKey{k, other} {
		for _, m := range []string{"tick", "reset"} {
			_, err := e.s.SetAlarm(e.ctx, &store.Alarm{ObjectKey: key, Method: m, FireAt: objAt(0)})
			mustOK(e.t, err, "SetAlarm")
		}
	}
	mustOK(e.t, e.s.DeleteObject(e.ctx, k), "DeleteObject")
	_, err := e.s.GetObject(e.ctx, k)
	mustErrIs(e.t, err, store.ErrNotFound, "GetObject after delete")
	_, err = e.s.GetObjectStorage(e.ctx, k)
	mustErrIs(e.t, err, store.ErrNotFound, "GetObjectStorage after delete")
	mustErrIs(e.t, e.s.DeleteObject(e.ctx, k), store.ErrNotFound, "DeleteObject twice")

	due, err := e.s.DueAlarms(e.ctx, objAt(time.Hour), 0)
	mustOK(e.t, err, "DueAlarms")
	for _, a := range due {
		if a.ObjectKey == k {
			e.t.Fatalf("alarm %s of the deleted object is still due", a.ID)
		}
	}
	equal(e.t, "due alarms of the other object", len(due), 2)
	e.checkStorage("other object", other, map[string]string{"n": "2"})

	// Recreated under the same key, it starts empty.
	e.create(k)
	e.checkStorage("recreated", k, nil)
	alarms, err := e.s.ListAlarms(e.ctx, k)
	mustOK(e.t, err, "ListAlarms of the recreated object")
	equal(e.t, "alarms of the recreated object", len(alarms), 0)
}
