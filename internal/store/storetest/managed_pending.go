package storetest

import (
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// mgPendingCases: ListPendingSessions finds input that no turn has taken —
// the orphan that recovery must wake after a crash between storing a
// message and starting its turn — and nothing else.
var mgPendingCases = []mgCase{
	{"OnlyUntakenUserInput", func(e *mgEnv) {
		pending := e.session(store.ManagedSession{ID: "sesn_a_pending"})
		e.appendTypes(pending.ID, "user.message")

		processed := e.session(store.ManagedSession{ID: "sesn_b_processed"})
		evs := e.appendTypes(processed.ID, "user.message", "session.status_running", "agent.message", "session.status_idle")
		s := e.getSession(processed.ID)
		s.ProcessedSeq = evs[0].Seq
		_, err := e.s.UpdateManagedSession(e.ctx, s)
		mustOK(e.t, err, "UpdateManagedSession(processed)")

		again := e.session(store.ManagedSession{ID: "sesn_c_second_message"})
		evs = e.appendTypes(again.ID, "user.message", "agent.message", "user.message")
		s = e.getSession(again.ID)
		s.ProcessedSeq = evs[0].Seq
		_, err = e.s.UpdateManagedSession(e.ctx, s)
		mustOK(e.t, err, "UpdateManagedSession(again)")

		running := e.session(store.ManagedSession{ID: "sesn_d_running"})
		evs = e.appendTypes(running.ID, "user.message")
		e.runRow(store.RunRow{SessionID: running.ID, TurnSeq: evs[0].Seq, Owner: "node/boot_1", LeaseExpiresAt: time.Now().Add(time.Minute)})

		terminated := e.session(store.ManagedSession{ID: "sesn_e_terminated"})
		e.appendTypes(terminated.ID, "user.message")
		s = e.getSession(terminated.ID)
		now := time.Now()
		s.TerminatedAt = &now
		_, err = e.s.UpdateManagedSession(e.ctx, s)
		mustOK(e.t, err, "UpdateManagedSession(terminated)")

		agentOnly := e.session(store.ManagedSession{ID: "sesn_f_agent_only"})
		e.appendTypes(agentOnly.ID, "agent.message")
		e.session(store.ManagedSession{ID: "sesn_g_empty"})

		got, err := e.s.ListPendingSessions(e.ctx)
		mustOK(e.t, err, "ListPendingSessions")
		mgEqualIDs(e.t, "pending sessions", got, pending.ID, again.ID)
	}},
	{"EmptyIsNotNil", func(e *mgEnv) {
		got, err := e.s.ListPendingSessions(e.ctx)
		mustOK(e.t, err, "ListPendingSessions")
		if got == nil || len(got) != 0 {
			e.t.Fatalf("ListPendingSessions on an empty store = %#v, want an empty slice", got)
		}
	}},
}
