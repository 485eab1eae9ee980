package object_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/object"
	"github.com/agentkernel/agentkernel/internal/store"
)

// A counter keeps its value across hibernate and wake, in both storage
// modes, and the lifecycle leaves its audit trail.
func TestCounterSurvivesHibernation(t *testing.T) {
	for _, class := range []string{"counter", "wcounter"} {
		t.Run(class, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			k := key(class, "user-123")
			for i := 1; i <= 3; i++ {
				if got := e.mustCall(t, k, "increment", map[string]any{"amount": 5}); got != int64(5*i) {
					t.Fatalf("increment %d: %d", i, got)
				}
			}
			o, err := e.rt.Hibernate(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			if o.Status != store.ObjectHibernating || e.storedCount(t, k) != 15 {
				t.Fatalf("after hibernate: %s, stored %d", o.Status, e.storedCount(t, k))
			}
			sb, err := e.m.Get(ctx, "t1", o.SandboxID)
			if err != nil || sb.State != "cold" || sb.SessionKey != "do-"+class+"-user-123" {
				t.Fatalf("sandbox after hibernate: %+v %v", sb, err)
			}
			if got := e.mustCall(t, k, "get", nil); got != 15 {
				t.Fatalf("after wake: %d", got)
			}
			if got := e.mustCall(t, k, "increment", map[string]any{"amount": 1}); got != 16 {
				t.Fatalf("increment after wake: %d", got)
			}
			// Idle hibernation on the fake clock.
			rep := e.sweep(t, 61*time.Second)
			if !slices.Contains(rep.Hibernated, k) {
				t.Fatalf("idle pass did not hibernate %v: %+v", k, rep)
			}
			if got := e.mustCall(t, k, "get", nil); got != 16 {
				t.Fatalf("after idle hibernation and wake: %d", got)
			}
			want := []string{"ObjectCreated", "ObjectHibernated", "ObjectWoken", "ObjectHibernated", "ObjectWoken"}
			if got := e.auditKinds(t, k); !slices.Equal(got, want) {
				t.Fatalf("audit: %v, want %v", got, want)
			}
		})
	}
}

// 50 parallel read-modify-write increments on one object give exactly 50:
// calls are delivered one at a time.
func TestParallelIncrementsAreSerialised(t *testing.T) {
	e := newEnv(t)
	k := key("counter", "p")
	e.mustCall(t, k, "get", nil)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.call(t, k, "rincrement", nil); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := e.mustCall(t, k, "get", nil); got != 50 {
		t.Fatalf("50 parallel increments gave %d", got)
	}
}

// A hibernation requested while a call runs waits for it, and a call that
// arrives during the hibernation runs after it, on the woken object.
func TestHibernationNeverRacesACall(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	k := key("counter", "race")
	e.mustCall(t, k, "get", nil)
	slow := make(chan error, 1)
	go func() {
		_, err := e.call(t, k, "slow", map[string]any{"ms": 300})
		slow <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the slow call take the object
	hib := make(chan error, 1)
	go func() {
		_, err := e.rt.Hibernate(ctx, k)
		hib <- err
	}()
	time.Sleep(50 * time.Millisecond) // queue the hibernation behind it
	got := e.mustCall(t, k, "increment", nil)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	if err := <-hib; err != nil {
		t.Fatal(err)
	}
	if got != 2 {
		t.Fatalf("increment after slow+hibernate: %d, want 2", got)
	}
	want := []string{"ObjectCreated", "ObjectHibernated", "ObjectWoken"}
	if kinds := e.auditKinds(t, k); !slices.Equal(kinds, want) {
		t.Fatalf("audit %v, want %v", kinds, want)
	}
}

func TestCallErrors(t *testing.T) {
	e := newEnv(t, func(c *object.Config) { c.Limits.CallTimeout = 300 * 1e6 })
	ctx := context.Background()
	k := key("counter", "e")

	_, err := e.call(t, key("nope", "x"), "get", nil)
	if !errors.Is(err, object.ErrUnknownClass) {
		t.Fatalf("unknown class: %v", err)
	}
	var fe *object.FieldError
	if _, err := e.call(t, k, "__storage", nil); !errors.As(err, &fe) || fe.Field != "method" {
		t.Fatalf("method __storage: %v", err)
	}
	if _, err := e.call(t, k, "a/b", nil); !errors.As(err, &fe) || fe.Field != "method" {
		t.Fatalf("method a/b: %v", err)
	}
	big := make([]byte, object.MaxArgsBytes+1)
	for i := range big {
		big[i] = ' '
	}
	big[0] = '1'
	var le *object.LimitError
	if _, err := e.rt.Call(ctx, object.CallParams{TenantID: "t1", Class: "counter", ID: "e", Method: "get", Args: big}); !errors.As(err, &le) || !le.TooLarge {
		t.Fatalf("args over 1 MB: %v", err)
	}
	// The object's own HTTP error comes back as it is, and is not retried.
	_, err = e.call(t, k, "fail", map[string]any{"status": 418})
	var oe *object.ObjectError
	if !errors.As(err, &oe) || oe.Status != 418 || string(oe.Body) != "{\"message\":\"failed on purpose\"}\n" {
		t.Fatalf("object error: %#v", err)
	}
	// Over call_timeout: 504.
	if _, err := e.call(t, k, "slow", map[string]any{"ms": 2000}); !errors.Is(err, object.ErrCallTimeout) {
		t.Fatalf("slow call: %v", err)
	}
	// A server that never comes up: 503 sandbox_unavailable, nothing left.
	if _, err := e.call(t, key("broken", "b"), "get", nil); !errors.Is(err, object.ErrSandboxUnavailable) {
		t.Fatalf("broken class: %v", err)
	}
	if _, err := e.rt.Get(ctx, key("broken", "b")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("broken object was recorded: %v", err)
	}
	// Another tenant does not see the object.
	if _, err := e.rt.Get(ctx, store.ObjectKey{TenantID: "t2", Class: "counter", ID: "e"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other tenant: %v", err)
	}
}

// A sandbox destroyed under an object (e.g. through the sandboxes API)
// fails the call in flight with 503; the next call gets a new sandbox with
// the persisted storage.
func TestDestroyedSandboxIsReplaced(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	k := key("wcounter", "d")
	e.mustCall(t, k, "increment", map[string]any{"amount": 3})
	o, err := e.st.GetObject(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Destroy(ctx, "t1", o.SandboxID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.call(t, k, "get", nil); !errors.Is(err, object.ErrSandboxUnavailable) {
		t.Fatalf("call on a destroyed sandbox: %v", err)
	}
	if got := e.mustCall(t, k, "increment", nil); got != 4 {
		t.Fatalf("after replacement: %d", got)
	}
	o2, err := e.st.GetObject(ctx, k)
	if err != nil || o2.SandboxID == o.SandboxID || o2.Status != store.ObjectActive {
		t.Fatalf("object after replacement: %+v %v", o2, err)
	}
}
