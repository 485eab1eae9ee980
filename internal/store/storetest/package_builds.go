package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ExercisePackageBuilds runs the PackageBuildStore contract. newStore must
// return a fresh, empty store for each call and arrange its Close.
func ExercisePackageBuilds(ctx context.Context, t *testing.T, newStore func(t *testing.T) store.PackageBuildStore) {
	t.Helper()
	t.Run("CreateGetUpdate", func(t *testing.T) {
		s := newStore(t)
		b, err := s.CreatePackageBuild(ctx, &store.PackageBuild{TenantID: "t1", Key: "k1", EnvironmentID: "env_1", Status: store.BuildBuilding})
		if err != nil {
			t.Fatal(err)
		}
		if b.Version != 1 || b.Status != store.BuildBuilding || b.CreatedAt.IsZero() {
			t.Fatalf("created %+v", b)
		}
		if _, err := s.GetPackageBuild(ctx, "t2", "k1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("other tenant's key: %v, want ErrNotFound", err)
		}
		b.Status, b.Package, b.LogTail, b.Progress = store.BuildFailed, "pip:nope", "no such package", "pip 1/1"
		up, err := s.UpdatePackageBuild(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if up.Version != 2 {
			t.Fatalf("version after update = %d, want 2", up.Version)
		}
		if _, err := s.UpdatePackageBuild(ctx, b); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("stale update: %v, want ErrConflict", err)
		}
		got, err := s.GetPackageBuild(ctx, "t1", "k1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != store.BuildFailed || got.Package != "pip:nope" || got.LogTail != "no such package" || got.Progress != "pip 1/1" || got.EnvironmentID != "env_1" {
			t.Fatalf("got %+v", got)
		}
		if _, err := s.UpdatePackageBuild(ctx, &store.PackageBuild{TenantID: "t1", Key: "missing", Version: 1}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("update of a missing build: %v, want ErrNotFound", err)
		}
	})
	t.Run("OneCreatorWins", func(t *testing.T) {
		s := newStore(t)
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.CreatePackageBuild(ctx, &store.PackageBuild{TenantID: "t1", Key: "k", Status: store.BuildBuilding})
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, store.ErrAlreadyExists):
				t.Fatalf("create: %v", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d creators won, want 1", won)
		}
		if _, err := s.CreatePackageBuild(ctx, &store.PackageBuild{TenantID: "t2", Key: "k", Status: store.BuildBuilding}); err != nil {
			t.Fatalf("another tenant's build of the same key: %v", err)
		}
	})
}
