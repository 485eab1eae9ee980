package storetest

import (
	"reflect"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
)

var objClassCases = []objCase{
	{"PutGetRoundTrip", testObjClassRoundTrip},
	{"PutReplaces", testObjClassReplace},
	{"ListByTenant", testObjClassList},
	{"DeleteAndInvalid", testObjClassDelete},
}

func fullObjectClass(tenant, class string) store.ObjectClass {
	return store.ObjectClass{TenantID: tenant, Class: class, Image: "node:22-alpine", Driver: "docker",
		IdleTimeoutSeconds: 300, InitCommand: []string{"node", "/app/counter-server.js", "--port=9333"},
		MaxConcurrency: 4, StorageMode: "write-through", AppDir: "/app",
		Env:       map[string]string{"NODE_ENV": "production", "EMPTY": ""},
		Isolation: "class", ObjectsPerSandbox: 250}
}

// sameObjectClass compares every field but the timestamps.
func sameObjectClass(t *testing.T, what string, got, want *store.ObjectClass) {
	t.Helper()
	g, w := *got, *want
	g.CreatedAt, g.UpdatedAt = w.CreatedAt, w.UpdatedAt
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: got %+v, want %+v", what, g, w)
	}
}

func (e *objEnv) putClass(c store.ObjectClass) *store.ObjectClass {
	e.t.Helper()
	out, err := e.s.PutObjectClass(e.ctx, &c)
	mustOK(e.t, err, "PutObjectClass("+c.Class+")")
	return out
}

func testObjClassRoundTrip(e *objEnv) {
	in := fullObjectClass("tnt_a", "counter")
	out := e.putClass(in)
	sameObjectClass(e.t, "put", out, &in)
	if out.CreatedAt.IsZero() || !out.UpdatedAt.Equal(out.CreatedAt) {
		e.t.Fatalf("new class: CreatedAt %v, UpdatedAt %v: want both set and equal", out.CreatedAt, out.UpdatedAt)
	}
	got, err := e.s.GetObjectClass(e.ctx, "tnt_a", "counter")
	mustOK(e.t, err, "GetObjectClass")
	sameObjectClass(e.t, "read back", got, &in)
	objSameTime(e.t, "CreatedAt", got.CreatedAt, out.CreatedAt)

	// Empty InitCommand and Env read back nil.
	bare := e.putClass(store.ObjectClass{TenantID: "tnt_a", Class: "bare", InitCommand: []string{}, Env: map[string]string{}})
	got, err = e.s.GetObjectClass(e.ctx, "tnt_a", "bare")
	mustOK(e.t, err, "GetObjectClass(bare)")
	if bare.InitCommand != nil || bare.Env != nil || got.InitCommand != nil || got.Env != nil {
		e.t.Fatalf("empty InitCommand/Env read back as %#v/%#v", got.InitCommand, got.Env)
	}
	_, err = e.s.GetObjectClass(e.ctx, "tnt_a", "missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetObjectClass(unknown)")
	_, err = e.s.GetObjectClass(e.ctx, "tnt_b", "counter")
	mustErrIs(e.t, err, store.ErrNotFound, "GetObjectClass under another tenant")
}

func testObjClassReplace(e *objEnv) {
	first := e.putClass(fullObjectClass("tnt_a", "counter"))
	next := store.ObjectClass{TenantID: "tnt_a", Class: "counter", Image: "python:3.12-alpine",
		IdleTimeoutSeconds: 600, InitCommand: []string{"python", "/app/cache_server.py"}, StorageMode: "snapshot"}
	out := e.putClass(next)
	sameObjectClass(e.t, "replaced", out, &next)
	objSameTime(e.t, "CreatedAt kept on replace", out.CreatedAt, first.CreatedAt)
	if out.UpdatedAt.Before(first.UpdatedAt) {
		e.t.Fatalf("UpdatedAt went backwards: %v then %v", first.UpdatedAt, out.UpdatedAt)
	}
	got, err := e.s.GetObjectClass(e.ctx, "tnt_a", "counter")
	mustOK(e.t, err, "GetObjectClass after replace")
	sameObjectClass(e.t, "read back after replace", got, &next)
	objSameTime(e.t, "UpdatedAt read back", got.UpdatedAt, out.UpdatedAt)
}

func testObjClassList(e *objEnv) {
	for _, c := range []string{"timer", "counter", "session-cache"} {
		e.putClass(store.ObjectClass{TenantID: "tnt_a", Class: c})
	}
	e.putClass(store.ObjectClass{TenantID: "tnt_b", Class: "apple"})
	list := func(tenant string) []string {
		cs, err := e.s.ListObjectClasses(e.ctx, tenant)
		mustOK(e.t, err, "ListObjectClasses("+tenant+")")
		out := []string{}
		for _, c := range cs {
			equal(e.t, "listed class tenant", c.TenantID, tenant)
			out = append(out, c.Class)
		}
		return out
	}
	objSameList(e.t, "tenant a", list("tnt_a"), "counter", "session-cache", "timer")
	objSameList(e.t, "tenant b", list("tnt_b"), "apple")
	objSameList(e.t, "unknown tenant", list("tnt_c"))
}

func testObjClassDelete(e *objEnv) {
	e.putClass(store.ObjectClass{TenantID: "tnt_a", Class: "counter"})
	e.putClass(store.ObjectClass{TenantID: "tnt_b", Class: "counter"})
	mustOK(e.t, e.s.DeleteObjectClass(e.ctx, "tnt_a", "counter"), "DeleteObjectClass")
	_, err := e.s.GetObjectClass(e.ctx, "tnt_a", "counter")
	mustErrIs(e.t, err, store.ErrNotFound, "GetObjectClass after delete")
	_, err = e.s.GetObjectClass(e.ctx, "tnt_b", "counter")
	mustOK(e.t, err, "GetObjectClass of the other tenant's class")
	mustErrIs(e.t, e.s.DeleteObjectClass(e.ctx, "tnt_a", "counter"), store.ErrNotFound, "DeleteObjectClass twice")

	for name, c := range map[string]store.ObjectClass{
		"no class name":        {TenantID: "tnt_a"},
		"unknown mode":         {TenantID: "tnt_a", Class: "x", StorageMode: "eventually"},
		"negative idle":        {TenantID: "tnt_a", Class: "x", IdleTimeoutSeconds: -1},
		"negative concurrency": {TenantID: "tnt_a", Class: "x", MaxConcurrency: -1},
		"unknown isolation":    {TenantID: "tnt_a", Class: "x", Isolation: "tenant"},
		"negative per sandbox": {TenantID: "tnt_a", Class: "x", Isolation: "class", ObjectsPerSandbox: -1},
	} {
		_, err := e.s.PutObjectClass(e.ctx, &c)
		mustErrIs(e.t, err, store.ErrInvalid, "PutObjectClass with "+name)
	}
	_, err = e.s.GetObjectClass(e.ctx, "tnt_a", "x")
	mustErrIs(e.t, err, store.ErrNotFound, "GetObjectClass after rejected puts")
}
