package session_test

import (
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
)

func TestDeriveStatus(t *testing.T) {
	now := time.Now()
	live := &store.ManagedSession{ID: "s"}
	ended := &store.ManagedSession{ID: "s", TerminatedAt: &now}
	for _, c := range []struct {
		name string
		s    *store.ManagedSession
		rr   *store.RunRow
		want string
	}{
		{"no run row", live, nil, "idle"},
		{"run row", live, &store.RunRow{SessionID: "s"}, "running"},
		{"recovery owns the turn", live, &store.RunRow{SessionID: "s", Recovering: true}, "rescheduling"},
		{"terminated wins over a run row", ended, &store.RunRow{SessionID: "s"}, "terminated"},
		{"terminated", ended, nil, "terminated"},
	} {
		if got := session.DeriveStatus(c.s, c.rr); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
