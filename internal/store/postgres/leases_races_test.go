package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// A fenced batch reads its objects' lease rows FOR SHARE in resource
// order; RenewLeases updates every row of the node. Were the renewal to
// lock its rows in another order (the table's, here the reverse one: the
// leases were taken last resource first), each would wait for the other
// and Postgres would abort one with a deadlock.
func TestRenewLeasesWithFencedBatches(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	const objects, batchers, renewers, rounds = 16, 4, 2, 25
	keys := make([]store.ObjectKey, objects)
	fences := map[string]int64{}
	for i := objects - 1; i >= 0; i-- {
		keys[i] = store.ObjectKey{TenantID: "tnt_a", Class: "counter", ID: fmt.Sprintf("o%02d", i)}
		if _, err := s.CreateObject(ctx, &store.Object{ObjectKey: keys[i]}); err != nil {
			t.Fatal(err)
		}
		l, err := s.AcquireLease(ctx, store.ObjectResource(keys[i]), "node-a", "", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		fences[l.Resource] = l.Token
	}
	fctx := store.WithFences(ctx, func(r string) (int64, bool) { tok, ok := fences[r]; return tok, ok })
	batch := map[store.ObjectKey][]store.StorageWrite{}
	for _, k := range keys {
		batch[k] = []store.StorageWrite{{Key: "n", Value: []byte("1")}}
	}
	errs := make([]error, batchers+renewers)
	parallel(batchers+renewers, func(i int) {
		for range rounds {
			if i < batchers {
				errs[i] = s.ApplyStorageWriteBatch(fctx, batch)
			} else {
				var held []store.HeldLease
				held, errs[i] = s.RenewLeases(ctx, "node-a", time.Minute)
				if errs[i] == nil && len(held) != objects {
					errs[i] = fmt.Errorf("renewed %d leases, want %d", len(held), objects)
				}
			}
			if errs[i] != nil {
				return
			}
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("worker %d: %v", i, err)
		}
	}
}
