package sqlite

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
)

// TestLatestCheckpointPointerAndFallback moves the pointer by hand (as legacy
// or damaged data would have it): the pointer wins over creation order, and
// only an absent or dangling pointer falls back to the newest checkpoint.
func TestLatestCheckpointPointerAndFallback(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	if _, err := s.CreateSession(ctx, store.CreateSessionParams{ID: "sesn_1"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"cp_old", "cp_new"} {
		if _, err := s.CreateCheckpoint(ctx, "sesn_1", store.CheckpointMeta{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ pointer, want string }{
		{"cp_old", "cp_old"},  // pointer beats creation order
		{"cp_gone", "cp_new"}, // dangling
		{"", "cp_new"},        // absent
	} {
		if _, err := s.write.ExecContext(ctx, `UPDATE sessions SET checkpoint_id = ? WHERE id = 'sesn_1'`, c.pointer); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetLatestCheckpoint(ctx, "sesn_1")
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != c.want {
			t.Fatalf("pointer %q: latest is %s, want %s", c.pointer, got.ID, c.want)
		}
	}
}
