package storetest

import (
	"context"
	"fmt"
	"maps"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Fencing (store.WithFences): every object write made with fences checks,
// in its own transaction, that it carries its object's current lease
// token, and writes nothing when it does not.

var fenceCases = []leaseCase{
	{"CurrentTokenWrites", testFenceCurrent},
	{"TakenOverRefused", testFenceTakenOver},
	{"NotOwnedRefused", testFenceNotOwned},
	{"NoLeaseRefused", testFenceNoLease},
	{"BatchAllOrNothing", testFenceBatch},
	{"WithoutFencesUnchecked", testFenceAbsent},
}

// fencesOf gives the tokens of m and refuses every other resource.
func fencesOf(m map[string]int64) store.Fences {
	return func(resource string) (int64, bool) {
		tok, ok := m[resource]
		return tok, ok
	}
}

func (e *leaseEnv) fenced(k store.ObjectKey, token int64) context.Context {
	return store.WithFences(e.ctx, fencesOf(map[string]int64{store.ObjectResource(k): token}))
}

// fencedObject is an Active object with storage {"n": 1} and one pending
// alarm.
type fencedObject struct {
	key   store.ObjectKey
	alarm string
}

func (e *leaseEnv) fencedObject(id string) fencedObject {
	e.t.Helper()
	k := objKey("tnt_a", "counter", id)
	_, err := e.s.CreateObject(e.ctx, &store.Object{ObjectKey: k, SandboxID: "sbx_" + id})
	mustOK(e.t, err, fmt.Sprintf("CreateObject(%q)", id))
	_, err = e.s.ApplyStorageWrites(e.ctx, k, []store.StorageWrite{objSet("n", "1")})
	mustOK(e.t, err, fmt.Sprintf("ApplyStorageWrites(%q)", id))
	a, err := e.s.SetAlarm(e.ctx, &store.Alarm{ObjectKey: k, Method: "tick", FireAt: objAt(0)})
	mustOK(e.t, err, fmt.Sprintf("SetAlarm(%q)", id))
	return fencedObject{key: k, alarm: a.ID}
}

// objectState is what a refused write must leave as it was.
type objectState struct {
	obj     *store.Object
	storage map[string]string
	fired   bool
}

func (e *leaseEnv) state(o fencedObject) objectState {
	e.t.Helper()
	obj, err := e.s.GetObject(e.ctx, o.key)
	mustOK(e.t, err, "GetObject")
	st, err := e.s.GetObjectStorage(e.ctx, o.key)
	mustOK(e.t, err, "GetObjectStorage")
	a, err := e.s.GetAlarm(e.ctx, o.alarm)
	mustOK(e.t, err, "GetAlarm")
	out := objectState{obj: obj, storage: map[string]string{}, fired: a.Fired}
	for k, v := range st {
		out.storage[k] = string(v)
	}
	return out
}

func (e *leaseEnv) unchanged(what string, o fencedObject, before objectState) {
	e.t.Helper()
	after := e.state(o)
	sameObject(e.t, what+": object", after.obj, before.obj)
	if !maps.Equal(after.storage, before.storage) {
		e.t.Fatalf("%s: storage %v, want it unchanged %v", what, after.storage, before.storage)
	}
	equal(e.t, what+": alarm fired", after.fired, before.fired)
}

// fencedWrite is one of the object writes fences guard.
type fencedWrite struct {
	name string
	do   func(ctx context.Context) error
}

// fencedWrites lists every fenced write on o. Hibernate comes last: the
// writes before it expect an Active object.
func (e *leaseEnv) fencedWrites(o fencedObject) []fencedWrite {
	k := o.key
	return []fencedWrite{
		{"ApplyStorageWrites", func(ctx context.Context) error {
			_, err := e.s.ApplyStorageWrites(ctx, k, []store.StorageWrite{objSet("n", "2"), objSet("w", `"x"`)})
			return err
		}},
		{"ApplyStorageWriteBatch", func(ctx context.Context) error {
			return e.s.ApplyStorageWriteBatch(ctx, map[store.ObjectKey][]store.StorageWrite{k: {objSet("b", "3")}})
		}},
		{"ReplaceObjectStorage", func(ctx context.Context) error {
			_, err := e.s.ReplaceObjectStorage(ctx, k, objStorage("n", "4", "r", "true"))
			return err
		}},
		{"SetObjectActive", func(ctx context.Context) error {
			_, err := e.s.SetObjectActive(ctx, k, "sbx_other")
			return err
		}},
		{"MarkAlarmFired", func(ctx context.Context) error {
			return e.s.MarkAlarmFired(ctx, o.alarm, "")
		}},
		{"HibernateObject", func(ctx context.Context) error {
			_, err := e.s.HibernateObject(ctx, k, objStorage("n", "5"))
			return err
		}},
	}
}

// refused asserts every fenced write on o with ctx fails with ErrFenced and
// leaves o as it was.
func (e *leaseEnv) refused(what string, ctx context.Context, o fencedObject) {
	e.t.Helper()
	before := e.state(o)
	for _, w := range e.fencedWrites(o) {
		mustErrIs(e.t, w.do(ctx), store.ErrFenced, what+": "+w.name)
		e.unchanged(what+": after a refused "+w.name, o, before)
	}
}

// accepted asserts every fenced write on o with ctx succeeds.
func (e *leaseEnv) accepted(what string, ctx context.Context, o fencedObject) {
	e.t.Helper()
	for _, w := range e.fencedWrites(o) {
		mustOK(e.t, w.do(ctx), what+": "+w.name)
	}
	after := e.state(o)
	equal(e.t, what+": status", after.obj.Status, store.ObjectHibernating)
	equal(e.t, what+": SandboxID", after.obj.SandboxID, "sbx_other")
	equal(e.t, what+": alarm fired", after.fired, true)
	if !maps.Equal(after.storage, map[string]string{"n": "5"}) {
		e.t.Fatalf("%s: storage %v, want {n: 5}", what, after.storage)
	}
}

func testFenceCurrent(e *leaseEnv) {
	o := e.fencedObject("c1")
	a := e.acquire(store.ObjectResource(o.key), nodeA, addrA, leaseTTL)
	e.accepted("node a with its token", e.fenced(o.key, a.Token), o)
}

func testFenceTakenOver(e *leaseEnv) {
	o := e.fencedObject("c1")
	r := store.ObjectResource(o.key)
	a := e.acquire(r, nodeA, addrA, leaseShort)
	b := e.takeOver(r, nodeB, addrB, leaseTTL)
	e.refused("node a after node b took over", e.fenced(o.key, a.Token), o)
	e.refused("a token greater than the current one", e.fenced(o.key, b.Token+1), o)
	e.accepted("node b with its token", e.fenced(o.key, b.Token), o)
}

func testFenceNotOwned(e *leaseEnv) {
	o := e.fencedObject("c1")
	a := e.acquire(store.ObjectResource(o.key), nodeA, addrA, leaseTTL)
	nothing := store.WithFences(e.ctx, func(string) (int64, bool) { return a.Token, false })
	e.refused("fences that own nothing", nothing, o)
	other := store.WithFences(e.ctx, fencesOf(map[string]int64{store.ObjectResource(objKey("tnt_a", "counter", "c2")): a.Token}))
	e.refused("fences of another object", other, o)
}

func testFenceNoLease(e *leaseEnv) {
	o := e.fencedObject("c1")
	r := store.ObjectResource(o.key)
	e.refused("a token for an object never leased", e.fenced(o.key, 1), o)
	a := e.acquire(r, nodeA, addrA, leaseTTL)
	mustOK(e.t, e.s.ReleaseLease(e.ctx, r, a.Token), "ReleaseLease")
	e.refused("node a after releasing", e.fenced(o.key, a.Token), o)
}

// One fenced object in a batch refuses the whole batch: the other
// objects, whose tokens are current, get nothing either.
func testFenceBatch(e *leaseEnv) {
	o1, o2 := e.fencedObject("c1"), e.fencedObject("c2")
	r1, r2 := store.ObjectResource(o1.key), store.ObjectResource(o2.key)
	a1 := e.acquire(r1, nodeA, addrA, leaseTTL)
	a2 := e.acquire(r2, nodeA, addrA, leaseShort)
	e.takeOver(r2, nodeB, addrB, leaseTTL)
	before1, before2 := e.state(o1), e.state(o2)
	batch := map[store.ObjectKey][]store.StorageWrite{o1.key: {objSet("n", "9")}, o2.key: {objSet("n", "9")}}

	stale := store.WithFences(e.ctx, fencesOf(map[string]int64{r1: a1.Token, r2: a2.Token}))
	mustErrIs(e.t, e.s.ApplyStorageWriteBatch(stale, batch), store.ErrFenced, "batch with one taken-over object")
	e.unchanged("the current object after the refused batch", o1, before1)
	e.unchanged("the taken-over object after the refused batch", o2, before2)

	partial := store.WithFences(e.ctx, fencesOf(map[string]int64{r1: a1.Token}))
	mustErrIs(e.t, e.s.ApplyStorageWriteBatch(partial, batch), store.ErrFenced, "batch with one object the fences do not cover")
	e.unchanged("the current object after the uncovered batch", o1, before1)
	e.unchanged("the uncovered object after the uncovered batch", o2, before2)

	// Its own objects only, node a's batch writes.
	mine := map[store.ObjectKey][]store.StorageWrite{o1.key: {objSet("n", "9")}}
	mustOK(e.t, e.s.ApplyStorageWriteBatch(stale, mine), "batch of the current object alone")
	st, err := e.s.GetObjectStorage(e.ctx, o1.key)
	mustOK(e.t, err, "GetObjectStorage")
	jsonEq(e.t, "n after node a's own batch", st["n"], "9")
}

// A write without fences (a daemon alone) is not checked, whoever holds
// the object's lease.
func testFenceAbsent(e *leaseEnv) {
	o := e.fencedObject("c1")
	e.acquire(store.ObjectResource(o.key), nodeB, addrB, leaseTTL)
	e.accepted("no fences", e.ctx, o)
	o2 := e.fencedObject("c2")
	e.accepted("no fences, no lease", e.ctx, o2)
}
