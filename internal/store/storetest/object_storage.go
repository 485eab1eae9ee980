package storetest

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agentkernel/agentkernel/internal/store"
)

var objStorageCases = []objCase{
	{"HibernateReplacesWholeStorage", testObjHibernate},
	{"HibernateFailureChangesNothing", testObjHibernateAtomic},
	{"ReplaceKeepsStatus", testObjReplace},
	{"ApplyWritesInOrder", testObjApply},
	{"ApplyWritesAllOrNothing", testObjApplyAtomic},
	{"ApplyBatch", testObjBatch},
	{"ApplyBatchAllOrNothing", testObjBatchAtomic},
	{"GetStorage", testObjGetStorage},
	{"ConcurrentWritersKeepTotalsExact", testObjWriteRace},
}

func testObjHibernate(e *objEnv) {
	k := objKey("tnt_a", "counter", "h")
	e.create(k)
	before := e.apply(k, objSet("a", "1"), objSet("b", `"old"`), objSet("c", `{"x":[1,2]}`))
	o, err := e.s.HibernateObject(e.ctx, k, objStorage("b", `"new"`, "d", `{"deep": {"k": null}}`, "ü", `"€"`))
	mustOK(e.t, err, "HibernateObject")
	want := *before
	want.Status, want.Version, want.UpdatedAt, want.HibernatedAt = store.ObjectHibernating, before.Version+1, o.UpdatedAt, o.HibernatedAt
	// Multi-byte keys and values count in bytes: "ü" is 2, `"€"` is 5.
	want.StorageKeys, want.StorageBytes = 3, int64(1+5+1+len(`{"deep": {"k": null}}`)+2+5)
	sameObject(e.t, "hibernated", o, &want)
	sameObject(e.t, "read back", e.get(k), &want)
	if o.HibernatedAt == nil || !o.HibernatedAt.Equal(o.UpdatedAt) {
		e.t.Fatalf("HibernatedAt = %v, want the hibernation time %v", o.HibernatedAt, o.UpdatedAt)
	}
	equal(e.t, "SandboxID kept for recovery", o.SandboxID, before.SandboxID)
	e.checkStorage("after hibernate", k, map[string]string{"b": `"new"`, "d": `{"deep": {"k": null}}`, "ü": `"€"`})

	empty, err := e.s.HibernateObject(e.ctx, k, nil)
	mustOK(e.t, err, "HibernateObject with empty storage")
	equal(e.t, "Version", empty.Version, o.Version+1)
	e.checkStorage("after hibernating empty", k, nil)

	_, err = e.s.HibernateObject(e.ctx, objKey("tnt_a", "counter", "missing"), objStorage("a", "1"))
	mustErrIs(e.t, err, store.ErrNotFound, "HibernateObject(unknown)")
}

// testObjHibernateAtomic: a bad value among good ones (sorting between
// them) fails the whole hibernation.
func testObjHibernateAtomic(e *objEnv) {
	k := objKey("tnt_a", "counter", "ha")
	e.create(k)
	before := e.apply(k, objSet("a", "1"), objSet("m", "2"))
	for name, bad := range map[string]map[string]string{
		"value not JSON":  {"a": "10", "k": `{"unterminated":`, "z": "3"},
		"empty value":     {"a": "10", "k": ``, "z": "3"},
		"key not UTF-8":   {"a": "10", "k\xff": `1`, "z": "3"},
		"value not UTF-8": {"a": "10", "k": "\"\xff\"", "z": "3"},
	} {
		_, err := e.s.HibernateObject(e.ctx, k, objStorage(objFlatten(bad)...))
		mustErrIs(e.t, err, store.ErrInvalid, "HibernateObject with "+name)
		sameObject(e.t, "object after failed hibernate ("+name+")", e.get(k), before)
		e.checkStorage("storage after failed hibernate ("+name+")", k, map[string]string{"a": "1", "m": "2"})
	}
}

func objFlatten(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k, v)
	}
	return out
}

func testObjReplace(e *objEnv) {
	k := objKey("tnt_a", "counter", "r")
	e.create(k)
	before := e.apply(k, objSet("a", "1"), objSet("b", "2"))
	o, err := e.s.ReplaceObjectStorage(e.ctx, k, objStorage("b", "20", "c", "30"))
	mustOK(e.t, err, "ReplaceObjectStorage")
	equal(e.t, "Status", o.Status, store.ObjectActive)
	equal(e.t, "Version", o.Version, before.Version+1)
	objSameTimePtr(e.t, "HibernatedAt", o.HibernatedAt, nil)
	sameObject(e.t, "read back", e.get(k), o)
	e.checkStorage("after replace", k, map[string]string{"b": "20", "c": "30"})

	// On a hibernating object it stays Hibernating.
	h, err := e.s.HibernateObject(e.ctx, k, objStorage("b", "20"))
	mustOK(e.t, err, "HibernateObject")
	o, err = e.s.ReplaceObjectStorage(e.ctx, k, objStorage("z", "true"))
	mustOK(e.t, err, "ReplaceObjectStorage on a hibernating object")
	equal(e.t, "Status", o.Status, store.ObjectHibernating)
	objSameTimePtr(e.t, "HibernatedAt", o.HibernatedAt, h.HibernatedAt)
	e.checkStorage("after replace while hibernating", k, map[string]string{"z": "true"})

	_, err = e.s.ReplaceObjectStorage(e.ctx, k, objStorage("a", "1", "b", "nope", "c", "3"))
	mustErrIs(e.t, err, store.ErrInvalid, "ReplaceObjectStorage with a bad value")
	sameObject(e.t, "after failed replace", e.get(k), o)
	e.checkStorage("after failed replace", k, map[string]string{"z": "true"})
	_, err = e.s.ReplaceObjectStorage(e.ctx, objKey("tnt_a", "counter", "missing"), nil)
	mustErrIs(e.t, err, store.ErrNotFound, "ReplaceObjectStorage(unknown)")
}

func testObjApply(e *objEnv) {
	k := objKey("tnt_a", "counter", "w")
	created := e.create(k)
	o := e.apply(k, objSet("a", "1"), objSet("a", `{"v": 2}`), objDel("missing"), objSet("c", "3"), objDel("c"),
		objSet("ключ", `"значение"`))
	equal(e.t, "Version after one call", o.Version, created.Version+1)
	equal(e.t, "Status", o.Status, store.ObjectActive)
	sameObject(e.t, "returned object", o, e.checkStorage("after writes", k, map[string]string{"a": `{"v": 2}`, "ключ": `"значение"`}))

	o = e.apply(k, objSet("a", "null"), objDel("ключ"), objSet("b", `[]`))
	equal(e.t, "Version after two calls", o.Version, created.Version+2)
	e.checkStorage("after second writes", k, map[string]string{"a": "null", "b": "[]"})

	// Writes go to a hibernating object too; the status is the runtime's.
	_, err := e.s.HibernateObject(e.ctx, k, objStorage("a", "1"))
	mustOK(e.t, err, "HibernateObject")
	o = e.apply(k, objSet("b", "2"))
	equal(e.t, "Status after writes while hibernating", o.Status, store.ObjectHibernating)
	e.checkStorage("after writes while hibernating", k, map[string]string{"a": "1", "b": "2"})

	_, err = e.s.ApplyStorageWrites(e.ctx, objKey("tnt_a", "counter", "missing"), []store.StorageWrite{objSet("a", "1")})
	mustErrIs(e.t, err, store.ErrNotFound, "ApplyStorageWrites(unknown)")
	_, err = e.s.ApplyStorageWrites(e.ctx, objKey("tnt_a", "counter", "missing"), []store.StorageWrite{objDel("a")})
	mustErrIs(e.t, err, store.ErrNotFound, "ApplyStorageWrites(unknown) of deletes only")
}

func testObjApplyAtomic(e *objEnv) {
	k := objKey("tnt_a", "counter", "wa")
	e.create(k)
	before := e.apply(k, objSet("a", "1"), objSet("b", "2"))
	for name, writes := range map[string][]store.StorageWrite{
		"bad JSON in the middle": {objSet("a", "10"), objDel("b"), objSet("c", `{"x"`), objSet("d", "4")},
		"empty value last":       {objSet("a", "10"), objDel("b"), objSet("c", "")},
		"bad key first":          {objSet("bad\x00key", "1"), objSet("a", "10")},
	} {
		_, err := e.s.ApplyStorageWrites(e.ctx, k, writes)
		mustErrIs(e.t, err, store.ErrInvalid, "ApplyStorageWrites with "+name)
		sameObject(e.t, "object after failed writes ("+name+")", e.get(k), before)
		e.checkStorage("storage after failed writes ("+name+")", k, map[string]string{"a": "1", "b": "2"})
	}
}

func testObjBatch(e *objEnv) {
	a, b, c := objKey("t1", "counter", "a"), objKey("t1", "counter", "b"), objKey("t2", "timer", "c")
	for _, k := range []store.ObjectKey{a, b, c} {
		e.create(k)
	}
	e.apply(b, objSet("old", "0"))
	before := e.get(c)
	mustOK(e.t, e.s.ApplyStorageWriteBatch(e.ctx, map[store.ObjectKey][]store.StorageWrite{
		a: {objSet("n", "1"), objSet("n", "2")},
		b: {objDel("old"), objSet("m", `"x"`)},
		c: nil, // no writes: nothing changes
	}), "ApplyStorageWriteBatch")
	e.checkStorage("a", a, map[string]string{"n": "2"})
	e.checkStorage("b", b, map[string]string{"m": `"x"`})
	sameObject(e.t, "c", e.checkStorage("c", c, nil), before)
	equal(e.t, "a's Version", e.get(a).Version, int64(2))
	equal(e.t, "b's Version", e.get(b).Version, int64(3))
	mustOK(e.t, e.s.ApplyStorageWriteBatch(e.ctx, nil), "ApplyStorageWriteBatch(empty)")
}

// testObjBatchAtomic: the failing object sorts between good ones, so an
// engine that applies in key order has written before it fails.
func testObjBatchAtomic(e *objEnv) {
	a, b, c := objKey("t", "counter", "a"), objKey("t", "counter", "b"), objKey("t", "counter", "c")
	e.create(a)
	e.create(c)
	e.apply(a, objSet("n", "1"))
	ba, bc := e.get(a), e.get(c)
	check := func(what string) {
		e.t.Helper()
		sameObject(e.t, what+": a", e.get(a), ba)
		sameObject(e.t, what+": c", e.get(c), bc)
		e.checkStorage(what+": a's storage", a, map[string]string{"n": "1"})
		e.checkStorage(what+": c's storage", c, nil)
	}
	err := e.s.ApplyStorageWriteBatch(e.ctx, map[store.ObjectKey][]store.StorageWrite{
		a: {objSet("n", "2")}, b: {objSet("n", "1")}, c: {objSet("n", "3")}})
	mustErrIs(e.t, err, store.ErrNotFound, "ApplyStorageWriteBatch with an unknown object")
	check("after a batch with an unknown object")

	err = e.s.ApplyStorageWriteBatch(e.ctx, map[store.ObjectKey][]store.StorageWrite{
		a: {objSet("n", "2"), objSet("o", "x")}, c: {objSet("n", "3")}})
	mustErrIs(e.t, err, store.ErrInvalid, "ApplyStorageWriteBatch with a bad value")
	check("after a batch with a bad value")
}

func testObjGetStorage(e *objEnv) {
	_, err := e.s.GetObjectStorage(e.ctx, objKey("t", "counter", "missing"))
	mustErrIs(e.t, err, store.ErrNotFound, "GetObjectStorage(unknown)")
	k := objKey("t", "counter", "empty")
	e.create(k)
	st, err := e.s.GetObjectStorage(e.ctx, k)
	mustOK(e.t, err, "GetObjectStorage(empty)")
	if st == nil || len(st) != 0 {
		e.t.Fatalf("empty storage: got %#v, want an empty map", st)
	}
	// Values come back byte for byte (spacing and key order kept).
	e.apply(k, objSet("v", `{ "z": 1,  "a": [ 2 ] }`))
	e.checkStorage("spacing kept", k, map[string]string{"v": `{ "z": 1,  "a": [ 2 ] }`})
}

// testObjWriteRace: writers on one object overwrite, add and delete keys
// concurrently, some through batches; the totals must stay exact.
func testObjWriteRace(e *objEnv) {
	const writers, calls = 6, 8
	k, other := objKey("t", "counter", "hot"), objKey("t", "counter", "warm")
	e.create(k)
	e.create(other)
	errs := make([]error, writers)
	race(writers, func(i int) {
		for j := range calls {
			// Values of varying length, and a key set and deleted by turns,
			// so a total computed from a stale read shows.
			shared := fmt.Sprintf(`"%s"`, strings.Repeat("x", (i*7+j*3)%11))
			flip := objDel("flip")
			if (i+j)%2 == 0 {
				flip = objSet("flip", shared)
			}
			writes := []store.StorageWrite{objSet("shared", shared), flip,
				objSet(fmt.Sprintf("own-%d", i), fmt.Sprint(j)), objDel(fmt.Sprintf("own-%d", (i+1)%writers))}
			var err error
			if i%2 == 0 {
				_, err = e.s.ApplyStorageWrites(e.ctx, k, writes)
			} else {
				// Batches name the two objects; they must not deadlock.
				err = e.s.ApplyStorageWriteBatch(e.ctx, map[store.ObjectKey][]store.StorageWrite{
					k: writes, other: {objSet(fmt.Sprint(i), fmt.Sprint(j))}})
			}
			if err != nil {
				errs[i] = errors.Join(errs[i], fmt.Errorf("call %d: %w", j, err))
				return
			}
		}
	})
	for i, err := range errs {
		mustOK(e.t, err, fmt.Sprintf("writer %d", i))
	}
	o := e.checkTotals("after concurrent writes", k)
	equal(e.t, "Version", o.Version, int64(1+writers*calls))
	e.checkTotals("other object after concurrent batches", other)
}
