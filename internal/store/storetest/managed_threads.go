package storetest

import (
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Session threads (multi-agent, issue 14): a thread is a managed session
// with ThreadOf set. It is listed with its parent only, announces no
// session webhooks of its own, and goes when its parent is deleted.
func testMgSessionThreads(e *mgEnv) {
	ep := e.endpoint(mgTenant, store.WebhookSessionCreated, store.WebhookSessionStatusIdled, store.WebhookSessionArchived)
	parent := e.session(store.ManagedSession{ID: "sesn_coord"})
	other := e.session(store.ManagedSession{ID: "sesn_other"})
	th2 := e.session(store.ManagedSession{ID: "sthr_b", ThreadOf: parent.ID, CreatedAt: sbAt(2 * time.Second)})
	th1 := e.session(store.ManagedSession{ID: "sthr_a", ThreadOf: parent.ID, CreatedAt: sbAt(time.Second)})
	e.session(store.ManagedSession{ID: "sthr_c", ThreadOf: other.ID})
	equal(e.t, "ThreadOf round trip", e.getSession(th1.ID).ThreadOf, parent.ID)
	equal(e.t, "ThreadOf of a session", e.getSession(parent.ID).ThreadOf, "")

	threads, err := e.s.ListSessionThreads(e.ctx, parent.ID)
	mgEqualIDs(e.t, "threads of the parent, oldest first", mgIDs(e.t, "ListSessionThreads", threads, err, mSessionID), th1.ID, th2.ID)
	threads, err = e.s.ListSessionThreads(e.ctx, "sesn_none")
	mgEqualIDs(e.t, "threads of an unknown session", mgIDs(e.t, "ListSessionThreads", threads, err, mSessionID))
	l, err := e.s.ListManagedSessions(e.ctx, store.ListResourcesParams{TenantID: mgTenant, Limit: 100})
	mgEqualIDs(e.t, "sessions list leaves threads out", mgIDs(e.t, "ListManagedSessions", l, err, mSessionID), "sesn_coord", "sesn_other")

	// A thread's own status events and archive announce nothing; the
	// parent's are announced as ever.
	e.appendTypes(th1.ID, "session.status_idle")
	at := sbAt(3 * time.Second)
	cur := e.getSession(th1.ID)
	cur.ArchivedAt = &at
	_, err = e.s.UpdateManagedSession(e.ctx, cur)
	mustOK(e.t, err, "archive a thread")
	e.appendTypes(parent.ID, "session.status_idle")
	equalStrings(e, "deliveries", deliveryTypes(e.deliveries(ep.ID)),
		"session.created/sesn_coord", "session.created/sesn_other", "session.status_idled/sesn_coord")

	evs := e.appendTypes(th2.ID, "user.message")
	mustOK(e.t, e.s.DeleteManagedSession(e.ctx, parent.ID), "DeleteManagedSession(parent)")
	for _, id := range []string{th1.ID, th2.ID} {
		_, err := e.s.GetManagedSession(e.ctx, id)
		mustErrIs(e.t, err, store.ErrNotFound, "a thread after its parent's delete")
	}
	_, err = e.s.GetEvent(e.ctx, th2.ID, evs[0].ID)
	mustErrIs(e.t, err, store.ErrNotFound, "a thread's event after its parent's delete")
	equal(e.t, "another session's thread stays", e.getSession("sthr_c").ThreadOf, other.ID)
}
