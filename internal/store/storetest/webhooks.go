package storetest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var mgWebhookCases = []mgCase{
	{"EventAppendWritesOutboxAtomically", testWebhookOutboxAtomic},
	{"ClaimInOrderPerSession", testWebhookClaimOrder},
	{"RedeliverAndDelete", testWebhookRedeliverDelete},
	{"RedeliveredWhileAnAttemptRuns", testWebhookRedeliverDuringAttempt},
	{"AgentAndEnvironmentLifecycle", testWebhookLifecycle},
	{"SessionArchivedAndDeleted", testWebhookSessionLifecycle},
	{"DeploymentsAndRuns", testWebhookDeployments},
	{"SessionThreads", testWebhookSessionThreads},
	{"SessionUpdated", testWebhookSessionUpdated},
	{"VaultsAndCredentials", testWebhookVaults},
	{"CredentialRefreshFailed", testWebhookRefreshFailed},
	{"MemoryStores", testWebhookMemoryStores},
	{"Prune", testWebhookPrune},
}

func (e *mgEnv) endpoint(tenant string, types ...string) *store.WebhookEndpoint {
	e.t.Helper()
	ep, err := e.s.CreateWebhookEndpoint(e.ctx, &store.WebhookEndpoint{TenantID: tenant, URL: "https://hooks.example.com/x",
		EventTypes: types, Secret: "whsec_c2VjcmV0Cg=="})
	mustOK(e.t, err, "CreateWebhookEndpoint")
	return ep
}

func (e *mgEnv) deliveries(endpointID string) []*store.WebhookDelivery {
	e.t.Helper()
	ds, err := e.s.ListWebhookDeliveries(e.ctx, store.ListWebhookDeliveriesParams{EndpointID: endpointID})
	mustOK(e.t, err, "ListWebhookDeliveries")
	return ds
}

func deliveryTypes(ds []*store.WebhookDelivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.EventType + "/" + d.OrderKey
	}
	return out
}

func equalStrings(e *mgEnv, what string, got []string, want ...string) {
	e.t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		e.t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// An event append (single, batch, turn end) writes the outbox rows of the
// endpoints subscribed to what it announces, in its transaction: a failed
// append writes none, and another tenant's endpoint gets nothing.
func testWebhookOutboxAtomic(e *mgEnv) {
	ep := e.endpoint(mgTenant, store.WebhookSessionCreated, store.WebhookSessionStatusRunStarted, store.WebhookSessionStatusIdled,
		store.WebhookSessionOutcomeEvaluated)
	other := e.endpoint(mgOtherTenant, store.WebhookSessionCreated, store.WebhookSessionStatusIdled)
	s := e.session(store.ManagedSession{ID: "sesn_wh"})
	equalStrings(e, "after create", deliveryTypes(e.deliveries(ep.ID)), "session.created/sesn_wh")

	evs, err := e.s.AppendEvents(e.ctx, s.ID, []store.NewEvent{{Type: "user.message"}, {Type: "session.status_running"},
		{Type: "agent.message"}, {Type: "span.outcome_evaluation_end"}, {Type: "session.status_idle"}, {Type: "session.status_rescheduled"}})
	mustOK(e.t, err, "AppendEvents")
	ds := e.deliveries(ep.ID)
	equalStrings(e, "after append", deliveryTypes(ds), "session.created/sesn_wh",
		"session.status_run_started/sesn_wh", "session.outcome_evaluation_ended/sesn_wh", "session.status_idled/sesn_wh")
	for i, d := range ds {
		equal(e.t, fmt.Sprintf("delivery %d status", i), d.Status, store.DeliveryPending)
		equal(e.t, fmt.Sprintf("delivery %d tenant", i), d.TenantID, mgTenant)
		if i > 0 && ds[i-1].Seq >= d.Seq {
			e.t.Fatalf("delivery seqs out of order: %d then %d", ds[i-1].Seq, d.Seq)
		}
		var body struct {
			ID        string            `json:"id"`
			Type      string            `json:"type"`
			CreatedAt time.Time         `json:"created_at"`
			Data      map[string]string `json:"data"`
		}
		mustOK(e.t, json.Unmarshal(d.Payload, &body), "payload")
		equal(e.t, "payload id", body.ID, d.EventID)
		equal(e.t, "payload type", body.Type, "event")
		equal(e.t, "payload data.type", body.Data["type"], d.EventType)
		equal(e.t, "payload data.id", body.Data["id"], s.ID)
		equal(e.t, "payload data.organization_id", body.Data["organization_id"], mgTenant)
	}
	sbSameTime(e.t, "idled payload time", mustTime(e, ds[3].Payload), evs[4].CreatedAt)
	equal(e.t, "other tenant's deliveries", len(e.deliveries(other.ID)), 0)

	// A rejected append (duplicate id) rolls its outbox rows back.
	_, err = e.s.AppendEvents(e.ctx, s.ID, []store.NewEvent{{Type: "session.status_idle"}, {ID: evs[0].ID, Type: "user.message"}})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "AppendEvents with a stored id")
	equal(e.t, "deliveries after a failed append", len(e.deliveries(ep.ID)), 4)

	// The batch path writes them too.
	s2 := e.session(store.ManagedSession{ID: "sesn_wh2"})
	_, err = e.s.AppendEventsBatch(e.ctx, map[string][]store.NewEvent{
		s.ID: {{Type: "session.status_running"}}, s2.ID: {{Type: "session.status_idle"}}})
	mustOK(e.t, err, "AppendEventsBatch")
	equalStrings(e, "after batch", deliveryTypes(e.deliveries(ep.ID))[4:], "session.created/sesn_wh2",
		"session.status_run_started/sesn_wh", "session.status_idled/sesn_wh2")
}

func mustTime(e *mgEnv, payload json.RawMessage) time.Time {
	e.t.Helper()
	var b struct {
		CreatedAt time.Time `json:"created_at"`
	}
	mustOK(e.t, json.Unmarshal(payload, &b), "payload created_at")
	return b.CreatedAt
}

// Claims take only the oldest pending delivery of an endpoint and
// session; a leased one hides the rest until it is finished, a dead one
// lets the next go.
func testWebhookClaimOrder(e *mgEnv) {
	ep := e.endpoint(mgTenant, store.WebhookSessionStatusRunStarted, store.WebhookSessionStatusIdled)
	a := e.session(store.ManagedSession{ID: "sesn_a"})
	b := e.session(store.ManagedSession{ID: "sesn_b"})
	e.appendTypes(a.ID, "session.status_running", "session.status_idle")
	e.appendTypes(b.ID, "session.status_running", "session.status_idle")
	now := time.Now().Add(time.Minute)
	claim := func(at time.Time) []string {
		e.t.Helper()
		ds, err := e.s.ClaimWebhookDeliveries(e.ctx, store.ClaimWebhookParams{Now: at, Lease: time.Minute, Limit: 10})
		mustOK(e.t, err, "ClaimWebhookDeliveries")
		return deliveryTypes(ds)
	}
	equalStrings(e, "first claim", claim(now), "session.status_run_started/sesn_a", "session.status_run_started/sesn_b")
	equalStrings(e, "claim while leased", claim(now))
	ds := e.deliveries(ep.ID)
	_, err := e.s.FinishWebhookAttempt(e.ctx, store.WebhookAttempt{ID: ds[0].ID, Delivered: true, At: now, NextAttemptAt: now})
	mustOK(e.t, err, "FinishWebhookAttempt delivered")
	_, err = e.s.FinishWebhookAttempt(e.ctx, store.WebhookAttempt{ID: ds[2].ID, Error: "503", Status: 503, At: now,
		NextAttemptAt: now.Add(time.Hour)})
	mustOK(e.t, err, "FinishWebhookAttempt failed")
	equalStrings(e, "after a's head delivered, b's failed", claim(now), "session.status_idled/sesn_a")
	_, err = e.s.FinishWebhookAttempt(e.ctx, store.WebhookAttempt{ID: ds[1].ID, Delivered: true, At: now, NextAttemptAt: now})
	mustOK(e.t, err, "FinishWebhookAttempt delivered")
	equalStrings(e, "after b's retry is due", claim(now.Add(2*time.Hour)), "session.status_run_started/sesn_b")
	d, err := e.s.FinishWebhookAttempt(e.ctx, store.WebhookAttempt{ID: ds[2].ID, Dead: true, Error: "503", At: now, NextAttemptAt: now})
	mustOK(e.t, err, "FinishWebhookAttempt dead")
	equal(e.t, "dead status", d.Status, store.DeliveryDead)
	equal(e.t, "attempts", d.Attempts, int64(2))
	equalStrings(e, "after b's head is dead", claim(now.Add(3*time.Hour)), "session.status_idled/sesn_b")
}

func testWebhookRedeliverDelete(e *mgEnv) {
	ep := e.endpoint(mgTenant, store.WebhookSessionStatusIdled)
	s := e.session(store.ManagedSession{ID: "sesn_r"})
	e.appendTypes(s.ID, "session.status_idle")
	d := e.deliveries(ep.ID)[0]
	now := time.Now().UTC().Truncate(time.Millisecond)
	_, err := e.s.FinishWebhookAttempt(e.ctx, store.WebhookAttempt{ID: d.ID, Dead: true, At: now, NextAttemptAt: now})
	mustOK(e.t, err, "FinishWebhookAttempt")
	r, err := e.s.RedeliverWebhookDelivery(e.ctx, d.ID, now)
	mustOK(e.t, err, "RedeliverWebhookDelivery")
	equal(e.t, "redelivered status", r.Status, store.DeliveryPending)
	equal(e.t, "redelivered attempts", r.Attempts, int64(0))
	_, err = e.s.RedeliverWebhookDelivery(e.ctx, "whd_missing", now)
	mustErrIs(e.t, err, store.ErrNotFound, "RedeliverWebhookDelivery(missing)")

	got, err := e.s.GetWebhookEndpoint(e.ctx, ep.ID)
	mustOK(e.t, err, "GetWebhookEndpoint")
	equalStrings(e, "event types", got.EventTypes, store.WebhookSessionStatusIdled)
	list, err := e.s.ListWebhookEndpoints(e.ctx, mgOtherTenant)
	mustOK(e.t, err, "ListWebhookEndpoints")
	equal(e.t, "other tenant's endpoints", len(list), 0)
	mustOK(e.t, e.s.DeleteWebhookEndpoint(e.ctx, ep.ID), "DeleteWebhookEndpoint")
	mustErrIs(e.t, e.s.DeleteWebhookEndpoint(e.ctx, ep.ID), store.ErrNotFound, "DeleteWebhookEndpoint twice")
	_, err = e.s.GetWebhookDelivery(e.ctx, d.ID)
	mustErrIs(e.t, err, store.ErrNotFound, "GetWebhookDelivery after delete")
	e.appendTypes(s.ID, "session.status_idle")
	equal(e.t, "deliveries after delete", len(e.deliveries(ep.ID)), 0)
}

// A redelivery made while an attempt runs stands: the attempt's outcome,
// recorded after it against the claim it made, is refused, and the
// delivery is claimed again.
func testWebhookRedeliverDuringAttempt(e *mgEnv) {
	ep := e.endpoint(mgTenant, store.WebhookSessionStatusIdled)
	s := e.session(store.ManagedSession{ID: "sesn_rd"})
	e.appendTypes(s.ID, "session.status_idle")
	now := time.Now().Add(time.Minute).UTC().Truncate(time.Microsecond)
	ds, err := e.s.ClaimWebhookDeliveries(e.ctx, store.ClaimWebhookParams{Now: now, Lease: time.Minute, Limit: 10})
	mustOK(e.t, err, "ClaimWebhookDeliveries")
	equal(e.t, "claimed", len(ds), 1)
	_, err = e.s.RedeliverWebhookDelivery(e.ctx, ds[0].ID, now)
	mustOK(e.t, err, "RedeliverWebhookDelivery")
	_, err = e.s.FinishWebhookAttempt(e.ctx, store.WebhookAttempt{ID: ds[0].ID, Delivered: true, At: now, NextAttemptAt: now, Claimed: ds[0].NextAttemptAt})
	mustErrIs(e.t, err, store.ErrConflict, "FinishWebhookAttempt after a redelivery")
	d := e.deliveries(ep.ID)[0]
	equal(e.t, "status after the refused finish", d.Status, store.DeliveryPending)
	equal(e.t, "attempts after the refused finish", d.Attempts, int64(0))
	again, err := e.s.ClaimWebhookDeliveries(e.ctx, store.ClaimWebhookParams{Now: now, Lease: time.Minute, Limit: 10})
	mustOK(e.t, err, "ClaimWebhookDeliveries again")
	equal(e.t, "claimed again", len(again), 1)
	out, err := e.s.FinishWebhookAttempt(e.ctx, store.WebhookAttempt{ID: again[0].ID, Delivered: true, At: now, NextAttemptAt: now, Claimed: again[0].NextAttemptAt})
	mustOK(e.t, err, "FinishWebhookAttempt of the redelivery")
	equal(e.t, "delivered", out.Status, store.DeliveryDelivered)
}

// Agent and environment writes announce themselves in their transaction;
// a refused write and a second archive announce nothing.
func testWebhookLifecycle(e *mgEnv) {
	ep := e.endpoint(mgTenant, store.WebhookAgentCreated, store.WebhookAgentUpdated, store.WebhookAgentArchived,
		store.WebhookEnvironmentCreated, store.WebhookEnvironmentUpdated, store.WebhookEnvironmentArchived,
		store.WebhookEnvironmentDeleted)
	a := e.agent(store.Agent{ID: "agent_wh"})
	_, err := e.s.UpdateAgent(e.ctx, a.ID, 1, json.RawMessage(`{"name":"b"}`))
	mustOK(e.t, err, "UpdateAgent")
	_, err = e.s.UpdateAgent(e.ctx, a.ID, 1, json.RawMessage(`{"name":"c"}`))
	mustErrIs(e.t, err, store.ErrVersionMismatch, "UpdateAgent with a stale version")
	for range 2 {
		_, err = e.s.ArchiveAgent(e.ctx, a.ID, time.Time{})
		mustOK(e.t, err, "ArchiveAgent")
	}
	en := e.environment(store.Environment{ID: "env_wh"})
	_, err = e.s.UpdateEnvironment(e.ctx, en.ID, json.RawMessage(`{"name":"b"}`))
	mustOK(e.t, err, "UpdateEnvironment")
	for range 2 {
		_, err = e.s.ArchiveEnvironment(e.ctx, en.ID, time.Time{})
		mustOK(e.t, err, "ArchiveEnvironment")
	}
	mustOK(e.t, e.s.DeleteEnvironment(e.ctx, en.ID), "DeleteEnvironment")
	mustErrIs(e.t, e.s.DeleteEnvironment(e.ctx, en.ID), store.ErrNotFound, "DeleteEnvironment twice")
	e.agent(store.Agent{ID: "agent_other", TenantID: mgOtherTenant})
	equalStrings(e, "lifecycle deliveries", deliveryTypes(e.deliveries(ep.ID)),
		"agent.created/agent_wh", "agent.updated/agent_wh", "agent.archived/agent_wh",
		"environment.created/env_wh", "environment.updated/env_wh", "environment.archived/env_wh",
		"environment.deleted/env_wh")
}

// An update that archives a session announces session.archived (other
// updates, and later ones, do not); deleting it announces session.deleted.
func testWebhookSessionLifecycle(e *mgEnv) {
	ep := e.endpoint(mgTenant, store.WebhookSessionArchived, store.WebhookSessionDeleted)
	s := e.session(store.ManagedSession{ID: "sesn_life"})
	s.SandboxID = "sbx_x"
	s, err := e.s.UpdateManagedSession(e.ctx, s)
	mustOK(e.t, err, "UpdateManagedSession")
	equal(e.t, "deliveries after a plain update", len(e.deliveries(ep.ID)), 0)
	now := time.Now().UTC().Truncate(time.Millisecond)
	s.ArchivedAt = &now
	stale := *s
	s, err = e.s.UpdateManagedSession(e.ctx, s)
	mustOK(e.t, err, "UpdateManagedSession (archive)")
	_, err = e.s.UpdateManagedSession(e.ctx, &stale)
	mustErrIs(e.t, err, store.ErrVersionMismatch, "UpdateManagedSession with a stale version")
	s.SandboxID = ""
	_, err = e.s.UpdateManagedSession(e.ctx, s)
	mustOK(e.t, err, "UpdateManagedSession (archived already)")
	mustOK(e.t, e.s.DeleteManagedSession(e.ctx, s.ID), "DeleteManagedSession")
	equalStrings(e, "session deliveries", deliveryTypes(e.deliveries(ep.ID)), "session.archived/sesn_life", "session.deleted/sesn_life")

	// A fork is created: announced before the events it starts with.
	ep2 := e.endpoint(mgTenant, store.WebhookSessionCreated, store.WebhookSessionStatusIdled)
	src := e.session(store.ManagedSession{ID: "sesn_src"})
	e.appendTypes(src.ID, "user.message", "session.status_running")
	_, err = e.s.ForkManagedSession(e.ctx, store.ForkParams{FromID: src.ID, NewID: "sesn_fork", AtSeq: 2,
		Append: []store.NewEvent{{Type: "session.status_idle"}}})
	mustOK(e.t, err, "ForkManagedSession")
	equalStrings(e, "fork deliveries", deliveryTypes(e.deliveries(ep2.ID)), "session.created/sesn_src",
		"session.created/sesn_fork", "session.status_idled/sesn_fork")
}

// A deployment's writes and its runs announce themselves in their own
// transactions, ordered by the deployment: created, paused, unpaused,
// updated, a run started and succeeded, a run started and failed (a second
// start of a run announces nothing), archived. A refused (stale) write
// announces nothing.
func testWebhookDeployments(e *mgEnv) {
	ep := e.endpoint(mgTenant, store.WebhookDeploymentCreated, store.WebhookDeploymentUpdated, store.WebhookDeploymentPaused,
		store.WebhookDeploymentUnpaused, store.WebhookDeploymentArchived, store.WebhookDeploymentRunStarted,
		store.WebhookDeploymentRunSucceeded, store.WebhookDeploymentRunFailed)
	fire := sbAt(time.Minute)
	d := e.deployment("depl_wh", &fire)
	put := func(what string, change func(*store.Deployment)) {
		e.t.Helper()
		change(d)
		var err error
		d, err = e.s.PutDeployment(e.ctx, d)
		mustOK(e.t, err, what)
	}
	put("pause", func(d *store.Deployment) { d.PausedReason = json.RawMessage(`{"type":"manual"}`) })
	put("unpause", func(d *store.Deployment) { d.PausedReason = nil })
	put("update", func(d *store.Deployment) { d.Doc = json.RawMessage(`{"name":"m"}`) })
	stale := *d
	stale.Version--
	_, err := e.s.PutDeployment(e.ctx, &stale)
	mustErrIs(e.t, err, store.ErrVersionMismatch, "stale PutDeployment")

	run, err := e.s.ClaimDeploymentFire(e.ctx, d.ID, fire, sbAtPtr(time.Hour), &store.DeploymentRun{ID: "drun_wh1",
		TenantID: mgTenant, DeploymentID: d.ID, Agent: json.RawMessage(`{"id":"agent_1"}`), Trigger: store.TriggerSchedule})
	mustOK(e.t, err, "ClaimDeploymentFire")
	_, err = e.s.StartDeploymentRun(e.ctx, run.ID, "sesn_wh1", nil)
	mustOK(e.t, err, "StartDeploymentRun")
	_, err = e.s.StartDeploymentRun(e.ctx, run.ID, "sesn_other", nil)
	mustOK(e.t, err, "StartDeploymentRun again")
	run2, err := e.s.InsertDeploymentRun(e.ctx, &store.DeploymentRun{ID: "drun_wh2", TenantID: mgTenant, DeploymentID: d.ID,
		Agent: json.RawMessage(`{"id":"agent_1"}`), Trigger: store.TriggerManual})
	mustOK(e.t, err, "InsertDeploymentRun")
	_, err = e.s.StartDeploymentRun(e.ctx, run2.ID, "", json.RawMessage(`{"type":"agent_archived_error","message":"gone"}`))
	mustOK(e.t, err, "StartDeploymentRun with an error")
	d, err = e.s.GetDeployment(e.ctx, d.ID) // the claim moved its version
	mustOK(e.t, err, "GetDeployment")
	put("archive", func(d *store.Deployment) { d.ArchivedAt = sbAtPtr(2 * time.Hour) })

	ds := e.deliveries(ep.ID)
	equalStrings(e, "deployment deliveries", deliveryTypes(ds),
		"deployment.created/depl_wh", "deployment.paused/depl_wh", "deployment.unpaused/depl_wh", "deployment.updated/depl_wh",
		"deployment_run.started/depl_wh", "deployment_run.succeeded/depl_wh",
		"deployment_run.started/depl_wh", "deployment_run.failed/depl_wh", "deployment.archived/depl_wh")
	ids := make([]string, len(ds))
	for i, dl := range ds {
		var body struct {
			Data map[string]string `json:"data"`
		}
		mustOK(e.t, json.Unmarshal(dl.Payload, &body), "payload")
		ids[i] = body.Data["id"]
	}
	equalStrings(e, "announced resources", ids, "depl_wh", "depl_wh", "depl_wh", "depl_wh",
		"drun_wh1", "drun_wh1", "drun_wh2", "drun_wh2", "depl_wh")
}

// payloadData is a delivery's payload data.
func payloadData(e *mgEnv, d *store.WebhookDelivery) map[string]string {
	e.t.Helper()
	var body struct {
		Data map[string]string `json:"data"`
	}
	mustOK(e.t, json.Unmarshal(d.Payload, &body), "payload")
	return body.Data
}

// A thread's life, recorded in its parent's (the primary thread's) log,
// is announced on the parent in the append's transaction, the thread's id
// in data.session_thread_id; the thread's own log announces nothing, and
// a thread event without a thread id is not announced.
func testWebhookSessionThreads(e *mgEnv) {
	ep := e.endpoint(mgTenant, store.WebhookSessionThreadCreated, store.WebhookSessionThreadIdled,
		store.WebhookSessionThreadTerminated)
	parent := e.session(store.ManagedSession{ID: "sesn_coordwh"})
	th := e.session(store.ManagedSession{ID: "sthr_wh", ThreadOf: parent.ID})
	thread := func(typ string) store.NewEvent {
		return store.NewEvent{Type: typ, Data: json.RawMessage(fmt.Sprintf(`{"type":%q,"session_thread_id":%q,"agent_name":"w"}`, typ, th.ID))}
	}
	evs, err := e.s.AppendEvents(e.ctx, parent.ID, []store.NewEvent{thread("session.thread_created"),
		{Type: "agent.thread_message_sent"}, thread("session.thread_status_idle"), thread("session.thread_status_terminated"),
		{Type: "session.thread_status_idle", Data: json.RawMessage(`{"type":"session.thread_status_idle"}`)}})
	mustOK(e.t, err, "AppendEvents(parent)")
	e.appendTypes(th.ID, "session.thread_created", "session.status_idle")
	ds := e.deliveries(ep.ID)
	equalStrings(e, "thread deliveries", deliveryTypes(ds), "session.thread_created/sesn_coordwh",
		"session.thread_idled/sesn_coordwh", "session.thread_terminated/sesn_coordwh")
	for i, d := range ds {
		data := payloadData(e, d)
		equal(e.t, fmt.Sprintf("delivery %d data.id", i), data["id"], parent.ID)
		equal(e.t, fmt.Sprintf("delivery %d data.session_thread_id", i), data["session_thread_id"], th.ID)
		equal(e.t, fmt.Sprintf("delivery %d data.type", i), data["type"], d.EventType)
	}
	sbSameTime(e.t, "thread_created payload time", mustTime(e, ds[0].Payload), evs[0].CreatedAt)

	// A rejected append (a stored id) rolls its outbox rows back.
	_, err = e.s.AppendEvents(e.ctx, parent.ID, []store.NewEvent{thread("session.thread_status_idle"),
		{ID: evs[0].ID, Type: "user.message"}})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "AppendEvents with a stored id")
	equal(e.t, "deliveries after a failed append", len(e.deliveries(ep.ID)), 3)
}

// A client's update (ClientUpdate) announces session.updated in its
// transaction; the runtime's updates, a stale update and a thread's update
// announce nothing.
func testWebhookSessionUpdated(e *mgEnv) {
	ep := e.endpoint(mgTenant, store.WebhookSessionUpdated)
	s := e.session(store.ManagedSession{ID: "sesn_upd"})
	s.SandboxID = "sbx_x"
	s, err := e.s.UpdateManagedSession(e.ctx, s)
	mustOK(e.t, err, "UpdateManagedSession (runtime)")
	stale := *s
	s.Doc, s.ClientUpdate = json.RawMessage(`{"title":"t"}`), true
	s, err = e.s.UpdateManagedSession(e.ctx, s)
	mustOK(e.t, err, "UpdateManagedSession (client)")
	equal(e.t, "ClientUpdate is not stored", e.getSession(s.ID).ClientUpdate, false)
	stale.ClientUpdate = true
	_, err = e.s.UpdateManagedSession(e.ctx, &stale)
	mustErrIs(e.t, err, store.ErrVersionMismatch, "UpdateManagedSession with a stale version")
	th := e.session(store.ManagedSession{ID: "sthr_upd", ThreadOf: s.ID})
	th.ClientUpdate = true
	_, err = e.s.UpdateManagedSession(e.ctx, th)
	mustOK(e.t, err, "UpdateManagedSession (thread)")
	ds := e.deliveries(ep.ID)
	equalStrings(e, "session.updated deliveries", deliveryTypes(ds), "session.updated/sesn_upd")
	sbSameTime(e.t, "session.updated payload time", mustTime(e, ds[0].Payload), s.UpdatedAt)
}

// Vault and credential writes announce themselves in their transactions;
// credential payloads name their vault. A vault's archive and delete
// announce each credential they archive or delete, then the vault; a
// second archive and a refused write announce nothing.
func testWebhookVaults(e *mgEnv) {
	ep := e.endpoint(mgTenant, store.WebhookVaultCreated, store.WebhookVaultArchived, store.WebhookVaultDeleted,
		store.WebhookVaultCredentialCreated, store.WebhookVaultCredentialArchived, store.WebhookVaultCredentialDeleted)
	vault := func(id string) *store.Vault {
		e.t.Helper()
		v, err := e.s.CreateVault(e.ctx, &store.Vault{ID: id, TenantID: mgTenant})
		mustOK(e.t, err, "CreateVault "+id)
		return v
	}
	cred := func(id, vaultID string) {
		e.t.Helper()
		_, err := e.s.CreateVaultCredential(e.ctx, &store.VaultCredential{ID: id, TenantID: mgTenant, VaultID: vaultID,
			Kind: "static_bearer", Secret: []byte("sealed"), KeyID: "k1"})
		mustOK(e.t, err, "CreateVaultCredential "+id)
	}
	a := vault("vlt_a")
	_, err := e.s.CreateVault(e.ctx, &store.Vault{ID: a.ID, TenantID: mgTenant})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CreateVault twice")
	cred("vcrd_1", a.ID)
	cred("vcrd_2", a.ID)
	cred("vcrd_3", a.ID)
	for range 2 {
		_, err = e.s.ArchiveVaultCredential(e.ctx, "vcrd_1", time.Time{})
		mustOK(e.t, err, "ArchiveVaultCredential")
	}
	mustOK(e.t, e.s.DeleteVaultCredential(e.ctx, "vcrd_2"), "DeleteVaultCredential")
	mustErrIs(e.t, e.s.DeleteVaultCredential(e.ctx, "vcrd_2"), store.ErrNotFound, "DeleteVaultCredential twice")
	for range 2 {
		_, err = e.s.ArchiveVault(e.ctx, a.ID, time.Time{})
		mustOK(e.t, err, "ArchiveVault")
	}
	_, err = e.s.CreateVaultCredential(e.ctx, &store.VaultCredential{ID: "vcrd_x", TenantID: mgTenant, VaultID: a.ID,
		Kind: "static_bearer", Secret: []byte("sealed"), KeyID: "k1"})
	mustErrIs(e.t, err, store.ErrConflict, "CreateVaultCredential in an archived vault")
	mustOK(e.t, e.s.DeleteVault(e.ctx, a.ID), "DeleteVault")
	mustErrIs(e.t, e.s.DeleteVault(e.ctx, a.ID), store.ErrNotFound, "DeleteVault twice")
	b := vault("vlt_b")
	cred("vcrd_4", b.ID)
	mustOK(e.t, e.s.DeleteVault(e.ctx, b.ID), "DeleteVault with a live credential")
	_, err = e.s.CreateVault(e.ctx, &store.Vault{ID: "vlt_other", TenantID: mgOtherTenant})
	mustOK(e.t, err, "CreateVault (other tenant)")

	ds := e.deliveries(ep.ID)
	equalStrings(e, "vault deliveries", deliveryTypes(ds),
		"vault.created/vlt_a", "vault_credential.created/vlt_a", "vault_credential.created/vlt_a",
		"vault_credential.created/vlt_a", "vault_credential.archived/vlt_a", "vault_credential.deleted/vlt_a",
		"vault_credential.archived/vlt_a", "vault.archived/vlt_a",
		"vault_credential.deleted/vlt_a", "vault_credential.deleted/vlt_a", "vault.deleted/vlt_a",
		"vault.created/vlt_b", "vault_credential.created/vlt_b", "vault_credential.deleted/vlt_b", "vault.deleted/vlt_b")
	got := make([]string, len(ds))
	for i, d := range ds {
		data := payloadData(e, d)
		got[i] = data["id"] + "@" + data["vault_id"]
	}
	equalStrings(e, "announced resources", got, "vlt_a@", "vcrd_1@vlt_a", "vcrd_2@vlt_a", "vcrd_3@vlt_a",
		"vcrd_1@vlt_a", "vcrd_2@vlt_a", "vcrd_3@vlt_a", "vlt_a@", "vcrd_1@vlt_a", "vcrd_3@vlt_a", "vlt_a@",
		"vlt_b@", "vcrd_4@vlt_b", "vcrd_4@vlt_b", "vlt_b@")
}

// Memory store writes announce themselves in their transactions; a second
// archive and a refused create announce nothing.
func testWebhookMemoryStores(e *mgEnv) {
	ep := e.endpoint(mgTenant, store.WebhookMemoryStoreCreated, store.WebhookMemoryStoreArchived, store.WebhookMemoryStoreDeleted)
	m, err := e.s.CreateMemoryStore(e.ctx, &store.MemoryStore{ID: "memstore_wh", TenantID: mgTenant, Name: "m"})
	mustOK(e.t, err, "CreateMemoryStore")
	_, err = e.s.CreateMemoryStore(e.ctx, &store.MemoryStore{ID: m.ID, TenantID: mgTenant, Name: "m"})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CreateMemoryStore twice")
	for range 2 {
		_, err = e.s.ArchiveMemoryStore(e.ctx, m.ID, time.Time{})
		mustOK(e.t, err, "ArchiveMemoryStore")
	}
	_, err = e.s.ArchiveMemoryStore(e.ctx, "memstore_none", time.Time{})
	mustErrIs(e.t, err, store.ErrNotFound, "ArchiveMemoryStore(missing)")
	mustOK(e.t, e.s.DeleteMemoryStore(e.ctx, m.ID), "DeleteMemoryStore")
	mustErrIs(e.t, e.s.DeleteMemoryStore(e.ctx, m.ID), store.ErrNotFound, "DeleteMemoryStore twice")
	equalStrings(e, "memory store deliveries", deliveryTypes(e.deliveries(ep.ID)),
		"memory_store.created/memstore_wh", "memory_store.archived/memstore_wh", "memory_store.deleted/memstore_wh")
}

// Pruning deletes final deliveries (delivered, dead) whose last attempt
// ended before the cutoff, oldest first up to the limit; pending ones,
// however old, and newer final ones stay.
func testWebhookPrune(e *mgEnv) {
	ep := e.endpoint(mgTenant, store.WebhookSessionStatusIdled)
	s := e.session(store.ManagedSession{ID: "sesn_prune"})
	e.appendTypes(s.ID, "session.status_idle", "session.status_idle", "session.status_idle", "session.status_idle",
		"session.status_idle")
	ds := e.deliveries(ep.ID)
	base := time.Now().UTC().Truncate(time.Millisecond)
	finish := func(d *store.WebhookDelivery, a store.WebhookAttempt) {
		e.t.Helper()
		a.ID, a.NextAttemptAt = d.ID, a.At
		_, err := e.s.FinishWebhookAttempt(e.ctx, a)
		mustOK(e.t, err, "FinishWebhookAttempt")
	}
	finish(ds[0], store.WebhookAttempt{Delivered: true, At: base.Add(-3 * time.Hour)})
	finish(ds[1], store.WebhookAttempt{Dead: true, Error: "503", At: base.Add(-2 * time.Hour)})
	finish(ds[2], store.WebhookAttempt{Error: "503", At: base.Add(-4 * time.Hour)}) // pending, retried later
	finish(ds[3], store.WebhookAttempt{Delivered: true, At: base})                  // within the retention
	// ds[4] was never attempted (pending).
	n, err := e.s.PruneWebhookDeliveries(e.ctx, base.Add(-time.Hour), 1)
	mustOK(e.t, err, "PruneWebhookDeliveries (limit 1)")
	equal(e.t, "pruned with limit 1", n, int64(1))
	_, err = e.s.GetWebhookDelivery(e.ctx, ds[0].ID)
	mustErrIs(e.t, err, store.ErrNotFound, "the oldest final delivery after pruning")
	n, err = e.s.PruneWebhookDeliveries(e.ctx, base.Add(-time.Hour), 100)
	mustOK(e.t, err, "PruneWebhookDeliveries")
	equal(e.t, "pruned", n, int64(1))
	left := e.deliveries(ep.ID)
	got := make([]string, len(left))
	for i, d := range left {
		got[i] = d.ID
	}
	equalStrings(e, "deliveries left", got, ds[2].ID, ds[3].ID, ds[4].ID)
	n, err = e.s.PruneWebhookDeliveries(e.ctx, base.Add(-time.Hour), 100)
	mustOK(e.t, err, "PruneWebhookDeliveries again")
	equal(e.t, "pruned again", n, int64(0))
}

// A failed refresh changes no row: its announcement is the whole write,
// naming the credential and its vault; a missing credential announces
// nothing.
func testWebhookRefreshFailed(e *mgEnv) {
	ep := e.endpoint(mgTenant, store.WebhookVaultCredentialRefreshFailed)
	_, err := e.s.CreateVault(e.ctx, &store.Vault{ID: "vlt_rf", TenantID: mgTenant})
	mustOK(e.t, err, "CreateVault")
	_, err = e.s.CreateVaultCredential(e.ctx, &store.VaultCredential{ID: "vcrd_rf", TenantID: mgTenant, VaultID: "vlt_rf",
		Kind: "mcp_oauth", Secret: []byte("sealed"), KeyID: "k1"})
	mustOK(e.t, err, "CreateVaultCredential")
	at := time.Now().UTC().Truncate(time.Millisecond)
	mustOK(e.t, e.s.AnnounceCredentialRefreshFailed(e.ctx, "vcrd_rf", at), "AnnounceCredentialRefreshFailed")
	mustErrIs(e.t, e.s.AnnounceCredentialRefreshFailed(e.ctx, "vcrd_none", at), store.ErrNotFound,
		"AnnounceCredentialRefreshFailed(missing)")
	ds := e.deliveries(ep.ID)
	equalStrings(e, "refresh_failed deliveries", deliveryTypes(ds), "vault_credential.refresh_failed/vlt_rf")
	data := payloadData(e, ds[0])
	equal(e.t, "data.id", data["id"], "vcrd_rf")
	equal(e.t, "data.vault_id", data["vault_id"], "vlt_rf")
	sbSameTime(e.t, "payload time", mustTime(e, ds[0].Payload), at)
}
