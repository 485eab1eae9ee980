package sandbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// TestBeforeStopRunsBeforeEveryStop: the BeforeStop hook runs before an
// asked hibernation, an idle one and a destroy, while the sandbox still
// answers and without its lock held (the hook reads a file through the
// manager); never for a sandbox that is already cold.
func TestBeforeStopRunsBeforeEveryStop(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	var mu sync.Mutex
	var seen []string
	e.m.AddHooks(sandbox.Hooks{BeforeStop: func(ctx context.Context, sb *store.Sandbox) {
		err := e.m.Client(ctx, sb.TenantID, sb.ID, func(c *guest.Client) error {
			b, err := c.ReadFileMax(ctx, "/workspace/x", 1<<10)
			mu.Lock()
			seen = append(seen, string(b))
			mu.Unlock()
			return err
		})
		if err != nil {
			t.Errorf("the sandbox in BeforeStop: %v", err)
		}
	}})
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
	if err := e.m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	in, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1", SleepAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	e.exec(t, in.ID, "printf asked > /workspace/x")
	if _, err := e.m.Hibernate(ctx, "t1", in.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Hibernate(ctx, "t1", in.ID); err != nil {
		t.Fatal(err)
	}
	if s := got(); len(s) != 1 || s[0] != "asked" {
		t.Fatalf("BeforeStop saw %q; want [asked] (once: the second hibernation found it cold)", s)
	}

	e.exec(t, in.ID, "printf idle > /workspace/x") // wakes it
	e.clock.BlockUntilWaiting(1)
	e.clock.Advance(2 * time.Minute)
	if r := <-e.reaped; len(r.Hibernated) != 1 {
		t.Fatalf("not hibernated when idle: %+v", r)
	}
	if s := got(); len(s) != 2 || s[1] != "idle" {
		t.Fatalf("BeforeStop saw %q; want [asked idle]", s)
	}

	e.exec(t, in.ID, "printf destroyed > /workspace/x")
	if _, err := e.m.Destroy(ctx, "t1", in.ID); err != nil {
		t.Fatal(err)
	}
	if s := got(); len(s) != 3 || s[2] != "destroyed" {
		t.Fatalf("BeforeStop saw %q; want [asked idle destroyed]", s)
	}
}
