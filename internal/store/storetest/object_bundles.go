package storetest

import (
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// objBundleCases: a class's bundle row is what keeps its archive's blob
// (store.BlobKeyColumns); it exists only for a class that exists, goes
// with the class, and is scoped to the tenant.
var objBundleCases = []objCase{
	{"PutGetReplace", testObjBundlePutGet},
	{"OnlyForAnExistingClass", testObjBundleNeedsClass},
	{"ListByTenant", testObjBundleList},
	{"DeletedWithTheClass", testObjBundleDelete},
}

func bundleRow(tenant, class, digest string) store.ObjectBundle {
	return store.ObjectBundle{TenantID: tenant, Class: class, BlobKey: "bundles/" + tenant + "/sha256/" + digest,
		SHA256: digest, Size: int64(len(digest)) * 100, UploadedAt: objAt(0)}
}

func (e *objEnv) putBundle(b store.ObjectBundle) *store.ObjectBundle {
	e.t.Helper()
	out, err := e.s.PutObjectBundle(e.ctx, &b)
	mustOK(e.t, err, "PutObjectBundle("+b.Class+")")
	return out
}

func (e *objEnv) bundle(tenant, class string) *store.ObjectBundle {
	e.t.Helper()
	b, err := e.s.GetObjectBundle(e.ctx, tenant, class)
	mustOK(e.t, err, "GetObjectBundle("+tenant+", "+class+")")
	return b
}

func sameBundle(e *objEnv, what string, got *store.ObjectBundle, want store.ObjectBundle) {
	e.t.Helper()
	objSameTime(e.t, what+": UploadedAt", got.UploadedAt, want.UploadedAt)
	g := *got
	g.UploadedAt = want.UploadedAt
	if g != want {
		e.t.Fatalf("%s: got %+v, want %+v", what, g, want)
	}
}

func testObjBundlePutGet(e *objEnv) {
	e.putClass(store.ObjectClass{TenantID: "tnt_a", Class: "counter"})
	in := bundleRow("tnt_a", "counter", "aaaa")
	sameBundle(e, "put", e.putBundle(in), in)
	sameBundle(e, "read back", e.bundle("tnt_a", "counter"), in)

	// A new upload replaces the row.
	next := bundleRow("tnt_a", "counter", "bbbb")
	next.UploadedAt = objAt(time.Hour)
	sameBundle(e, "replaced", e.putBundle(next), next)
	sameBundle(e, "read back after replace", e.bundle("tnt_a", "counter"), next)

	// Redefining the class (an upsert of its row) keeps its bundle.
	e.putClass(store.ObjectClass{TenantID: "tnt_a", Class: "counter", Image: "other"})
	sameBundle(e, "after the class was redefined", e.bundle("tnt_a", "counter"), next)

	// A zero UploadedAt is the time of the put.
	e.putClass(store.ObjectClass{TenantID: "tnt_a", Class: "timer"})
	blank := bundleRow("tnt_a", "timer", "cccc")
	blank.UploadedAt = time.Time{}
	out := e.putBundle(blank)
	if out.UploadedAt.IsZero() {
		e.t.Fatalf("a bundle put without UploadedAt reads back %v, want the time of the put", out.UploadedAt)
	}
	objSameTime(e.t, "UploadedAt read back", e.bundle("tnt_a", "timer").UploadedAt, out.UploadedAt)

	for name, b := range map[string]store.ObjectBundle{
		"no class":      {TenantID: "tnt_a", BlobKey: "k", SHA256: "s"},
		"no blob key":   {TenantID: "tnt_a", Class: "counter", SHA256: "s"},
		"no sha256":     {TenantID: "tnt_a", Class: "counter", BlobKey: "k"},
		"negative size": {TenantID: "tnt_a", Class: "counter", BlobKey: "k", SHA256: "s", Size: -1},
	} {
		_, err := e.s.PutObjectBundle(e.ctx, &b)
		mustErrIs(e.t, err, store.ErrInvalid, "PutObjectBundle with "+name)
	}
	sameBundle(e, "after rejected puts", e.bundle("tnt_a", "counter"), next)
}

func testObjBundleNeedsClass(e *objEnv) {
	_, err := e.s.PutObjectBundle(e.ctx, &store.ObjectBundle{TenantID: "tnt_a", Class: "ghost", BlobKey: "k", SHA256: "s"})
	mustErrIs(e.t, err, store.ErrNotFound, "PutObjectBundle of an undefined class")
	// Another tenant's class of the same name does not count.
	e.putClass(store.ObjectClass{TenantID: "tnt_b", Class: "ghost"})
	_, err = e.s.PutObjectBundle(e.ctx, &store.ObjectBundle{TenantID: "tnt_a", Class: "ghost", BlobKey: "k", SHA256: "s"})
	mustErrIs(e.t, err, store.ErrNotFound, "PutObjectBundle of a class only another tenant has")
	_, err = e.s.GetObjectBundle(e.ctx, "tnt_a", "ghost")
	mustErrIs(e.t, err, store.ErrNotFound, "GetObjectBundle after refused puts")
	_, err = e.s.GetObjectBundle(e.ctx, "tnt_b", "ghost")
	mustErrIs(e.t, err, store.ErrNotFound, "GetObjectBundle of the other tenant's class")
}

func testObjBundleList(e *objEnv) {
	for _, c := range []string{"timer", "counter", "bare"} {
		e.putClass(store.ObjectClass{TenantID: "tnt_a", Class: c})
	}
	e.putClass(store.ObjectClass{TenantID: "tnt_b", Class: "counter"})
	e.putBundle(bundleRow("tnt_a", "timer", "1111"))
	e.putBundle(bundleRow("tnt_a", "counter", "1111")) // the same archive as timer's
	e.putBundle(bundleRow("tnt_b", "counter", "2222"))
	list := func(tenant string) []string {
		bs, err := e.s.ListObjectBundles(e.ctx, tenant)
		mustOK(e.t, err, "ListObjectBundles("+tenant+")")
		out := []string{}
		for _, b := range bs {
			equal(e.t, "listed bundle tenant", b.TenantID, tenant)
			out = append(out, fmt.Sprintf("%s=%s", b.Class, b.SHA256))
		}
		return out
	}
	objSameList(e.t, "tenant a", list("tnt_a"), "counter=1111", "timer=1111")
	objSameList(e.t, "tenant b", list("tnt_b"), "counter=2222")
	objSameList(e.t, "unknown tenant", list("tnt_c"))
}

func testObjBundleDelete(e *objEnv) {
	for _, t := range []string{"tnt_a", "tnt_b"} {
		e.putClass(store.ObjectClass{TenantID: t, Class: "counter"})
		e.putBundle(bundleRow(t, "counter", "aaaa"))
	}
	mustOK(e.t, e.s.DeleteObjectBundle(e.ctx, "tnt_a", "counter"), "DeleteObjectBundle")
	_, err := e.s.GetObjectBundle(e.ctx, "tnt_a", "counter")
	mustErrIs(e.t, err, store.ErrNotFound, "GetObjectBundle after delete")
	mustErrIs(e.t, e.s.DeleteObjectBundle(e.ctx, "tnt_a", "counter"), store.ErrNotFound, "DeleteObjectBundle twice")
	_, err = e.s.GetObjectClass(e.ctx, "tnt_a", "counter")
	mustOK(e.t, err, "GetObjectClass after its bundle was deleted")
	e.bundle("tnt_b", "counter")

	// Deleting the class deletes its bundle row; a class defined again
	// under the name starts without one.
	e.putBundle(bundleRow("tnt_a", "counter", "bbbb"))
	mustOK(e.t, e.s.DeleteObjectClass(e.ctx, "tnt_a", "counter"), "DeleteObjectClass")
	_, err = e.s.GetObjectBundle(e.ctx, "tnt_a", "counter")
	mustErrIs(e.t, err, store.ErrNotFound, "GetObjectBundle after its class was deleted")
	e.putClass(store.ObjectClass{TenantID: "tnt_a", Class: "counter"})
	_, err = e.s.GetObjectBundle(e.ctx, "tnt_a", "counter")
	mustErrIs(e.t, err, store.ErrNotFound, "GetObjectBundle of a class defined again")
	sameBundle(e, "the other tenant's bundle", e.bundle("tnt_b", "counter"), bundleRow("tnt_b", "counter", "aaaa"))
}
