package object_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/object"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Tests of isolation = "class" (issue 15). Each fails on the code before
// it: the classes' isolation field did not exist there.

func (e *env) object(t *testing.T, k store.ObjectKey) *store.Object {
	t.Helper()
	o, err := e.st.GetObject(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (e *env) sandboxState(t *testing.T, id string) sandbox.State {
	t.Helper()
	in, err := e.m.Get(context.Background(), "", id)
	if err != nil {
		t.Fatal(err)
	}
	return in.State
}

// Two objects of a class-mode class share one sandbox and one server
// process, and each sees only its own storage, in both storage modes.
func TestClassIsolationSharesOneServer(t *testing.T) {
	for _, class := range []string{"ccounter", "cwcounter"} {
		t.Run(class, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			a, b := key(class, "a"), key(class, "b")
			if got := e.mustCall(t, a, "increment", map[string]any{"amount": 5}); got != 5 {
				t.Fatalf("a: %d", got)
			}
			if got := e.mustCall(t, b, "increment", map[string]any{"amount": 7}); got != 7 {
				t.Fatalf("b: %d (a's storage leaked into b?)", got)
			}
			if got := e.mustCall(t, a, "increment", nil); got != 6 {
				t.Fatalf("a again: %d", got)
			}
			oa, ob := e.object(t, a), e.object(t, b)
			if oa.SandboxID == "" || oa.SandboxID != ob.SandboxID {
				t.Fatalf("sandboxes: a %q, b %q: want one shared", oa.SandboxID, ob.SandboxID)
			}
			sb, err := e.m.Get(ctx, "t1", oa.SandboxID)
			if err != nil || sb.SessionKey != "dc-"+class+"-0" || sb.State != sandbox.StateActive {
				t.Fatalf("shared sandbox: %+v %v", sb, err)
			}
			if pa, pb := e.mustCall(t, a, "pid", nil), e.mustCall(t, b, "pid", nil); pa != pb {
				t.Fatalf("server pids: a %d, b %d: want one process", pa, pb)
			}
			if n := e.mustCall(t, a, "objects", nil); n != 2 {
				t.Fatalf("the server holds %d objects, want 2", n)
			}
			// Each object's storage is its own, live and persisted.
			for k, want := range map[store.ObjectKey]int64{a: 6, b: 7} {
				in, err := e.rt.Get(ctx, k)
				if err != nil || string(in.Storage["count"]) != fmt.Sprint(want) || len(in.Storage) != 1 {
					t.Fatalf("%s storage: %v %v", subject(k), in.Storage, err)
				}
				if _, err := e.rt.Hibernate(ctx, k); err != nil {
					t.Fatal(err)
				}
				if got := e.storedCount(t, k); got != want {
					t.Fatalf("%s stored %d, want %d", subject(k), got, want)
				}
			}
		})
	}
}

// Hibernation is per object: the other keeps answering from the same
// server; the sandbox stops when none is live and a call starts it again.
// A wake into the running sandbox starts nothing. Idle timeouts hibernate
// objects one by one.
func TestClassIsolationHibernatesPerObject(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := key("cwcounter", "a"), key("cwcounter", "b")
	e.mustCall(t, a, "increment", map[string]any{"amount": 3})
	e.mustCall(t, b, "increment", map[string]any{"amount": 4})
	pid := e.mustCall(t, b, "pid", nil)
	sbID := e.object(t, a).SandboxID

	if o, err := e.rt.Hibernate(ctx, a); err != nil || o.Status != store.ObjectHibernating {
		t.Fatalf("hibernate a: %+v %v", o, err)
	}
	if e.sandboxState(t, sbID) != sandbox.StateActive || e.object(t, b).Status != store.ObjectActive {
		t.Fatalf("after a hibernated: sandbox %s, b %s", e.sandboxState(t, sbID), e.object(t, b).Status)
	}
	if got := e.mustCall(t, b, "increment", nil); got != 5 {
		t.Fatalf("b after a hibernated: %d", got)
	}
	if n := e.mustCall(t, b, "objects", nil); n != 1 {
		t.Fatalf("the server still holds %d objects after a hibernated, want 1 (DELETE /__storage)", n)
	}
	// a wakes into the running sandbox: same server, its storage back.
	if got := e.mustCall(t, a, "increment", nil); got != 4 {
		t.Fatalf("a after wake: %d", got)
	}
	if p := e.mustCall(t, a, "pid", nil); p != pid {
		t.Fatalf("a woke in server %d, want the running %d", p, pid)
	}
	// None live: the sandbox stops.
	for _, k := range []store.ObjectKey{a, b} {
		if _, err := e.rt.Hibernate(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if st := e.sandboxState(t, sbID); st != sandbox.StateCold {
		t.Fatalf("shared sandbox with no live object: %s, want cold", st)
	}
	// A call starts it again.
	if got := e.mustCall(t, b, "get", nil); got != 5 {
		t.Fatalf("b after the sandbox stopped: %d", got)
	}
	if st := e.sandboxState(t, sbID); st != sandbox.StateActive {
		t.Fatalf("after a call: %s", st)
	}
	// Idle timeout (60 s) per object: a called 30 s after b, then 31 s on
	// only b is idle.
	e.mustCall(t, a, "get", nil)
	e.clock.Advance(30 * time.Second)
	e.mustCall(t, a, "get", nil)
	rep := e.sweep(t, 31*time.Second)
	if !slices.Contains(rep.Hibernated, b) || slices.Contains(rep.Hibernated, a) {
		t.Fatalf("idle pass: %+v: want b hibernated, a not", rep)
	}
	if e.sandboxState(t, sbID) != sandbox.StateActive || e.mustCall(t, a, "get", nil) != 4 {
		t.Fatal("a's sandbox stopped with a live")
	}
	want := []string{"ObjectCreated", "ObjectHibernated", "ObjectWoken", "ObjectHibernated"}
	if got := e.auditKinds(t, b); !slices.Equal(got, want) {
		t.Fatalf("b's audit: %v, want %v", got, want)
	}
}

// Objects of different tenants never share a sandbox.
func TestClassIsolationTenantsNeverShare(t *testing.T) {
	e := newEnv(t)
	k1 := store.ObjectKey{TenantID: "t1", Class: "ccounter", ID: "same"}
	k2 := store.ObjectKey{TenantID: "t2", Class: "ccounter", ID: "same"}
	e.mustCall(t, k1, "increment", map[string]any{"amount": 1})
	e.mustCall(t, k2, "increment", map[string]any{"amount": 2})
	o1, o2 := e.object(t, k1), e.object(t, k2)
	if o1.SandboxID == o2.SandboxID {
		t.Fatalf("tenants t1 and t2 share sandbox %s", o1.SandboxID)
	}
	// (Pids are per sandbox namespace: ask each server what it holds.)
	if e.mustCall(t, k1, "objects", nil) != 1 || e.mustCall(t, k2, "objects", nil) != 1 {
		t.Fatal("tenants t1 and t2 share a server process")
	}
	for k, want := range map[store.ObjectKey]int64{k1: 1, k2: 2} {
		if got := e.mustCall(t, k, "get", nil); got != want {
			t.Fatalf("%s/%s: %d, want %d", k.TenantID, k.ID, got, want)
		}
	}
}

// objects_per_sandbox bounds a shared sandbox: the third object of a class
// with 2 per sandbox gets a second one.
func TestClassIsolationObjectsPerSandbox(t *testing.T) {
	e := newEnv(t)
	ids := map[string]int{}
	for _, id := range []string{"x", "y", "z"} {
		e.mustCall(t, key("cpair", id), "increment", nil)
		ids[e.object(t, key("cpair", id)).SandboxID]++
	}
	if len(ids) != 2 {
		t.Fatalf("3 objects at 2 per sandbox in %d sandboxes: %v", len(ids), ids)
	}
}

// Calls to one object run one at a time in arrival order while calls to
// many objects of one shared server run at once.
func TestClassIsolationPerObjectOrdering(t *testing.T) {
	e := newEnv(t)
	const objects, calls = 8, 15
	var wg sync.WaitGroup
	errs := make(chan error, objects*calls)
	for i := range objects {
		k := key("cwcounter", fmt.Sprint("o", i))
		e.mustCall(t, k, "get", nil)
		for range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := e.call(t, k, "rincrement", nil); err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sb := ""
	for i := range objects {
		k := key("cwcounter", fmt.Sprint("o", i))
		if got := e.mustCall(t, k, "get", nil); got != calls {
			t.Fatalf("%s: %d parallel read-modify-write increments gave %d", subject(k), calls, got)
		}
		if got := e.storedCount(t, k); got != calls {
			t.Fatalf("%s stored %d", subject(k), got)
		}
		if id := e.object(t, k).SandboxID; sb != "" && id != sb {
			t.Fatalf("%s in %s, others in %s", subject(k), id, sb)
		} else {
			sb = id
		}
	}
}

// A server that does not answer X-Agentkernel-Objects: many (an old
// single-object helper) is refused for a class-mode class, and nothing of
// the attempt stays.
func TestClassIsolationRefusesSingleObjectServer(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.call(t, key("csingle", "a"), "get", nil)
	if !errors.Is(err, object.ErrSandboxUnavailable) || !strings.Contains(err.Error(), `isolation "class"`) || !strings.Contains(err.Error(), "X-Agentkernel-Objects") {
		t.Fatalf("single-object server for a class-mode class: %v", err)
	}
	if _, err := e.rt.Get(ctx, key("csingle", "a")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused object was recorded: %v", err)
	}
	list, err := e.m.List(ctx, "t1", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range list {
		t.Fatalf("sandbox left behind: %s %s %s", in.ID, in.SessionKey, in.State)
	}
}

// Deleting one object forgets it in the server and leaves the other's
// storage and the shared sandbox alone; deleting the last stops it.
func TestClassIsolationDeleteKeepsTheOthers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := key("ccounter", "a"), key("ccounter", "b")
	e.mustCall(t, a, "increment", map[string]any{"amount": 2})
	e.mustCall(t, b, "increment", map[string]any{"amount": 9})
	sbID := e.object(t, a).SandboxID
	if err := e.rt.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	if e.sandboxState(t, sbID) != sandbox.StateActive {
		t.Fatal("deleting a stopped the sandbox b lives in")
	}
	if got := e.mustCall(t, b, "get", nil); got != 9 {
		t.Fatalf("b after a was deleted: %d", got)
	}
	if n := e.mustCall(t, b, "objects", nil); n != 1 {
		t.Fatalf("the server holds %d objects after a was deleted, want 1", n)
	}
	if got := e.mustCall(t, a, "get", nil); got != 0 {
		t.Fatalf("a created again: %d, want a fresh 0", got)
	}
	// A hibernated object's deletion does not touch the shared sandbox.
	if _, err := e.rt.Hibernate(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	if e.sandboxState(t, sbID) != sandbox.StateActive || e.mustCall(t, b, "get", nil) != 9 {
		t.Fatal("deleting hibernated a disturbed b")
	}
	if err := e.rt.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	if st := e.sandboxState(t, sbID); st != sandbox.StateCold {
		t.Fatalf("shared sandbox after its last object was deleted: %s, want cold", st)
	}
}

// max_active_objects counts sandboxes: a running shared sandbox is one
// however many objects it serves, and the least recently used unit — here
// the whole shared sandbox — makes room.
func TestClassIsolationCountsTheSandboxAgainstTheActiveLimit(t *testing.T) {
	e := newEnv(t, func(c *object.Config) { c.Limits.MaxActiveObjects = 2 })
	ctx := context.Background()
	var shared []store.ObjectKey
	for i := range 5 {
		k := key("ccounter", fmt.Sprint("s", i))
		shared = append(shared, k)
		e.mustCall(t, k, "increment", nil)
	}
	e.clock.Advance(time.Second)
	e.mustCall(t, key("counter", "a"), "increment", nil)
	for _, k := range append(shared, key("counter", "a")) {
		if st := e.object(t, k).Status; st != store.ObjectActive {
			t.Fatalf("%s: %s with 5 class-mode objects and 1 object-mode object at max_active_objects 2", subject(k), st)
		}
	}
	e.clock.Advance(time.Second)
	e.mustCall(t, key("counter", "b"), "increment", nil)
	for _, k := range shared {
		if st := e.object(t, k).Status; st != store.ObjectHibernating {
			t.Fatalf("%s: %s, want hibernated with its least recently used sandbox", subject(k), st)
		}
	}
	if st := e.object(t, key("counter", "a")).Status; st != store.ObjectActive {
		t.Fatalf("counter/a: %s", st)
	}
	if st := e.sandboxState(t, e.object(t, shared[0]).SandboxID); st != sandbox.StateCold {
		t.Fatalf("evicted shared sandbox: %s", st)
	}
	if got := e.mustCall(t, shared[3], "get", nil); got != 1 {
		t.Fatalf("%s after eviction: %d", subject(shared[3]), got)
	}
	_ = ctx
}

// The class definition: isolation and objects_per_sandbox are checked,
// naming the field.
func TestClassIsolationValidation(t *testing.T) {
	base := object.ClassDef{Class: "c", InitCommand: []string{"/app/x"}}
	for _, tc := range []struct {
		field string
		mut   func(*object.ClassDef)
	}{
		{"isolation", func(d *object.ClassDef) { d.Isolation = "tenant" }},
		{"objects_per_sandbox", func(d *object.ClassDef) { d.ObjectsPerSandbox = 10 }},
		{"objects_per_sandbox", func(d *object.ClassDef) { d.Isolation = "object"; d.ObjectsPerSandbox = 10 }},
		{"objects_per_sandbox", func(d *object.ClassDef) { d.Isolation = "class"; d.ObjectsPerSandbox = -1 }},
		{"objects_per_sandbox", func(d *object.ClassDef) { d.Isolation = "class"; d.ObjectsPerSandbox = 10001 }},
	} {
		d := base
		tc.mut(&d)
		var fe *object.FieldError
		if err := object.ValidateClass(d); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: %v, want a FieldError on %s", d, err, tc.field)
		}
	}
	for _, iso := range []string{"", "object", "class"} {
		d := base
		d.Isolation = iso
		if err := object.ValidateClass(d); err != nil {
			t.Errorf("isolation %q: %v", iso, err)
		}
	}
	e := newEnv(t)
	c, err := e.rt.DefineClass(context.Background(), "t1", object.ClassDef{Class: "api", InitCommand: []string{"/app/x"}, Isolation: "class", ObjectsPerSandbox: 50})
	if err != nil || c.Isolation != "class" || c.ObjectsPerSandbox != 50 {
		t.Fatalf("defined: %+v %v", c, err)
	}
	c, err = e.rt.DefineClass(context.Background(), "t1", object.ClassDef{Class: "api2", InitCommand: []string{"/app/x"}, Isolation: "class"})
	if err != nil || c.ObjectsPerSandbox != 1000 || c.Def().Isolation != "class" {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	c, err = e.rt.Class(context.Background(), "t1", "counter")
	if err != nil || c.Isolation != "object" {
		t.Fatalf("default isolation: %+v %v", c, err)
	}
}

// A shared sandbox left running without a live object (the daemon died
// between the last object's hibernation and the sandbox's stop) is found
// at start and stopped by the idle pass.
func TestClassIsolationLeftoverSharedSandboxStops(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	k := key("ccounter", "left")
	e.mustCall(t, k, "increment", nil)
	sbID := e.object(t, k).SandboxID
	// The first daemon "dies" with the object hibernated in the store and
	// its shared sandbox still running.
	e.rt.Stop()
	if _, err := e.st.HibernateObject(ctx, k, map[string]json.RawMessage{"count": json.RawMessage("1")}); err != nil {
		t.Fatal(err)
	}
	lim := config.DefaultDurableObjects()
	lim.AppRoots = []string{e.app}
	rt, err := object.New(object.Config{Store: e.st, Sandboxes: e.m, Classes: counterClasses(e.app), Limits: lim,
		Clock: e.clock, Registry: prometheus.NewRegistry(), Swept: e.swept})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Stop)
	e.rt = rt
	if st := e.sandboxState(t, sbID); st != sandbox.StateActive {
		t.Fatalf("before the idle pass: %s", st)
	}
	// The stopped runtime's two loops left their waiters on the fake clock.
	e.clock.BlockUntilWaiting(4)
	e.sweep(t, 6*time.Second)
	if st := e.sandboxState(t, sbID); st != sandbox.StateCold {
		t.Fatalf("a running shared sandbox without objects after the idle pass: %s, want cold", st)
	}
	if got := e.mustCall(t, k, "get", nil); got != 1 {
		t.Fatalf("after: %d", got)
	}
}
