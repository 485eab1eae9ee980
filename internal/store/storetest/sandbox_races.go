package storetest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var sandboxRaceCases = []sandboxCase{
	{"CreateExactlyOneWins", testSandboxCreateRace},
	{"UpdateOneWinnerPerVersion", testSandboxUpdateRace},
	{"UpdateRetryLoopLosesNothing", testSandboxRetryLoop},
	{"TouchNeverFailsUpdate", testSandboxTouchRace},
	{"DeleteExpiredBackupsOnce", testDeleteExpiredRace},
}

func testSandboxCreateRace(e *sbEnv) {
	const n = 20
	errs := make([]error, n)
	race(n, func(i int) {
		_, errs[i] = e.s.CreateSandbox(e.ctx, &store.Sandbox{ID: "sbx_race", TenantID: "tnt_a", Image: fmt.Sprintf("creator-%d", i)})
	})
	wins := 0
	for i, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, store.ErrAlreadyExists):
			e.t.Fatalf("creator %d: got %v, want nil or ErrAlreadyExists", i, err)
		}
	}
	equal(e.t, "CreateSandbox race winners", wins, 1)
}

// testSandboxUpdateRace: every writer read version 1; exactly one may write.
func testSandboxUpdateRace(e *sbEnv) {
	const n = 20
	sb := e.create(store.Sandbox{ID: "sbx_cas", TenantID: "tnt_a", Image: "start"})
	errs := make([]error, n)
	race(n, func(i int) {
		next := *sb
		next.Image = fmt.Sprintf("writer-%d", i)
		next.Generation = int64(i + 1)
		_, errs[i] = e.s.UpdateSandbox(e.ctx, &next)
	})
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				e.t.Fatalf("writers %d and %d both updated from version %d", winner, i, sb.Version)
			}
			winner = i
		case !errors.Is(err, store.ErrVersionMismatch):
			e.t.Fatalf("writer %d: got %v, want nil or ErrVersionMismatch", i, err)
		}
	}
	if winner < 0 {
		e.t.Fatal("no writer won the race")
	}
	got := e.get("sbx_cas")
	equal(e.t, "Version", got.Version, sb.Version+1)
	// The stored row is the winner's alone, never a mix of two writers.
	equal(e.t, "Image", got.Image, fmt.Sprintf("writer-%d", winner))
	equal(e.t, "Generation", got.Generation, int64(winner+1))
}

// testSandboxRetryLoop: read-modify-write with retry on mismatch; every
// increment lands exactly once.
func testSandboxRetryLoop(e *sbEnv) {
	const workers, perWorker = 8, 5
	e.create(store.Sandbox{ID: "sbx_loop", TenantID: "tnt_a"})
	var (
		mu        sync.Mutex
		successes int
		failures  []error
	)
	race(workers, func(i int) {
		for done := 0; done < perWorker; {
			cur, err := e.s.GetSandbox(e.ctx, "sbx_loop")
			if err == nil {
				cur.Generation++
				cur.Metadata = map[string]string{"last": fmt.Sprint(i)}
				_, err = e.s.UpdateSandbox(e.ctx, cur)
			}
			switch {
			case err == nil:
				done++
				mu.Lock()
				successes++
				mu.Unlock()
			case errors.Is(err, store.ErrVersionMismatch):
			default:
				mu.Lock()
				failures = append(failures, err)
				mu.Unlock()
				return
			}
		}
	})
	if len(failures) > 0 {
		e.t.Fatalf("read-modify-write: %v", failures)
	}
	got := e.get("sbx_loop")
	equal(e.t, "successful updates", successes, workers*perWorker)
	equal(e.t, "Generation", got.Generation, int64(successes))
	equal(e.t, "Version", got.Version, int64(successes)+1)
}

// testSandboxTouchRace: one writer updates from the version its last update
// returned while others touch; only a touch could make it mismatch, and a
// touch must not.
func testSandboxTouchRace(e *sbEnv) {
	const touchers, touches, updates = 4, 25, 25
	cur := e.create(store.Sandbox{ID: "sbx_touch", TenantID: "tnt_a", LastActivityAt: sbAt(0)})
	errs := make([]error, touchers+1)
	race(touchers+1, func(i int) {
		if i < touchers {
			for j := range touches {
				if err := e.s.TouchSandbox(e.ctx, "sbx_touch", sbAt(time.Duration(i*touches+j)*time.Second)); err != nil {
					errs[i] = fmt.Errorf("touch %d: %w", j, err)
					return
				}
			}
			return
		}
		for j := range updates {
			next := *cur
			next.Generation++
			out, err := e.s.UpdateSandbox(e.ctx, &next)
			if err != nil {
				errs[i] = fmt.Errorf("update %d from version %d: %w", j, next.Version, err)
				return
			}
			cur = out
		}
	})
	for i, err := range errs {
		if err != nil {
			e.t.Fatalf("goroutine %d: %v", i, err)
		}
	}
	got := e.get("sbx_touch")
	equal(e.t, "Version", got.Version, int64(updates)+1)
	equal(e.t, "Generation", got.Generation, int64(updates))
}

// testDeleteExpiredRace: concurrent reapers each delete a disjoint share of
// the expired backups; none is returned twice or lost.
func testDeleteExpiredRace(e *sbEnv) {
	const backups, reapers = 60, 8
	now := sbAt(time.Hour)
	for i := range backups {
		e.backup(store.Backup{ID: fmt.Sprintf("bkp_%03d", i), TenantID: "tnt_a", SandboxID: "sbx_1",
			CreatedAt: sbAt(0), ExpiresAt: now.Add(-time.Duration(i) * time.Second)})
	}
	e.backup(store.Backup{ID: "bkp_live", TenantID: "tnt_a", SandboxID: "sbx_1", CreatedAt: sbAt(0), ExpiresAt: sbAt(2 * time.Hour)})
	got := make([][]*store.Backup, reapers)
	errs := make([]error, reapers)
	race(reapers, func(i int) {
		got[i], errs[i] = e.s.DeleteExpiredBackups(e.ctx, now)
	})
	seen := map[string]int{}
	for i := range reapers {
		mustOK(e.t, errs[i], fmt.Sprintf("reaper %d", i))
		for _, b := range got[i] {
			if prev, ok := seen[b.ID]; ok {
				e.t.Fatalf("backup %s returned by reapers %d and %d", b.ID, prev, i)
			}
			seen[b.ID] = i
		}
	}
	equal(e.t, "backups deleted in total", len(seen), backups)
	if _, ok := seen["bkp_live"]; ok {
		e.t.Fatal("an unexpired backup was deleted")
	}
	sbEqualIDs(e.t, "left", e.listBackupIDs("sbx_1"), "bkp_live")
}
