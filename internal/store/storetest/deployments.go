package storetest

import (
	"encoding/json"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var mgDeploymentCases = []mgCase{
	{"CreatePutVersion", testDeplPut},
	{"ClaimOnceAndStart", testDeplClaim},
	{"ListFilters", testDeplList},
}

func (e *mgEnv) deployment(id string, next *time.Time) *store.Deployment {
	d, err := e.s.CreateDeployment(e.ctx, &store.Deployment{ID: id, TenantID: mgTenant, AgentID: "agent_1",
		Doc: json.RawMessage(`{"name":"n"}`), NextFireAt: next})
	mustOK(e.t, err, "CreateDeployment "+id)
	return d
}

func testDeplPut(e *mgEnv) {
	d := e.deployment("depl_1", nil)
	equal(e.t, "Version", d.Version, int64(1))
	_, err := e.s.CreateDeployment(e.ctx, &store.Deployment{ID: "depl_1", TenantID: mgTenant, Doc: json.RawMessage(`{}`)})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "second CreateDeployment")
	d.Doc, d.PausedReason, d.NextFireAt = json.RawMessage(`{"name":"m"}`), json.RawMessage(`{"type":"manual"}`), sbAtPtr(time.Hour)
	up, err := e.s.PutDeployment(e.ctx, d)
	mustOK(e.t, err, "PutDeployment")
	equal(e.t, "Version after put", up.Version, int64(2))
	jsonEq(e.t, "Doc", up.Doc, `{"name":"m"}`)
	jsonEq(e.t, "PausedReason", up.PausedReason, `{"type":"manual"}`)
	sbSameTimePtr(e.t, "NextFireAt", up.NextFireAt, sbAtPtr(time.Hour))
	// A put computed from the stale read changes nothing.
	_, err = e.s.PutDeployment(e.ctx, d)
	mustErrIs(e.t, err, store.ErrVersionMismatch, "stale PutDeployment")
	_, err = e.s.PutDeployment(e.ctx, &store.Deployment{ID: "depl_none", Doc: json.RawMessage(`{}`)})
	mustErrIs(e.t, err, store.ErrNotFound, "PutDeployment of a missing deployment")
	_, err = e.s.GetDeployment(e.ctx, "depl_none")
	mustErrIs(e.t, err, store.ErrNotFound, "GetDeployment of a missing deployment")
}

func testDeplClaim(e *mgEnv) {
	fire := sbAt(time.Minute)
	d := e.deployment("depl_c", &fire)
	e.deployment("depl_later", sbAtPtr(time.Hour))
	paused := e.deployment("depl_p", &fire)
	paused.PausedReason = json.RawMessage(`{"type":"manual"}`)
	_, err := e.s.PutDeployment(e.ctx, paused)
	mustOK(e.t, err, "pause")

	due, err := e.s.DueDeployments(e.ctx, sbAt(2*time.Minute), 0)
	mustOK(e.t, err, "DueDeployments")
	if len(due) != 1 || due[0].ID != d.ID {
		e.t.Fatalf("DueDeployments = %d rows, want only depl_c (the paused and later ones are not due)", len(due))
	}
	run := &store.DeploymentRun{ID: "drun_1", TenantID: mgTenant, DeploymentID: d.ID, Agent: json.RawMessage(`{"id":"agent_1"}`),
		Trigger: store.TriggerSchedule, ScheduledAt: &fire, CreatedAt: sbAt(2 * time.Minute)}
	got, err := e.s.ClaimDeploymentFire(e.ctx, d.ID, fire, sbAtPtr(time.Hour), run)
	mustOK(e.t, err, "ClaimDeploymentFire")
	equal(e.t, "claimed run started", got.Started(), false)
	// The same fire claimed twice (a second poller, a restart) is refused
	// and makes no second run.
	run2 := *run
	run2.ID = "drun_2"
	_, err = e.s.ClaimDeploymentFire(e.ctx, d.ID, fire, sbAtPtr(time.Hour), &run2)
	mustErrIs(e.t, err, store.ErrConflict, "second claim of one fire")
	_, err = e.s.GetDeploymentRun(e.ctx, "drun_2")
	mustErrIs(e.t, err, store.ErrNotFound, "run of the refused claim")
	after, err := e.s.GetDeployment(e.ctx, d.ID)
	mustOK(e.t, err, "GetDeployment")
	sbSameTimePtr(e.t, "NextFireAt after claim", after.NextFireAt, sbAtPtr(time.Hour))
	sbSameTimePtr(e.t, "LastRunAt after claim", after.LastRunAt, sbAtPtr(2*time.Minute))
	equal(e.t, "Version after claim", after.Version, d.Version+1)

	un, err := e.s.UnstartedDeploymentRuns(e.ctx)
	mustOK(e.t, err, "UnstartedDeploymentRuns")
	equal(e.t, "unstarted runs", len(un), 1)
	listed, err := e.s.ListDeploymentRuns(e.ctx, store.ListDeploymentRunsParams{TenantID: mgTenant})
	mustOK(e.t, err, "ListDeploymentRuns")
	equal(e.t, "listed runs before start (unstarted are not listed)", len(listed), 0)

	st, err := e.s.StartDeploymentRun(e.ctx, "drun_1", "sesn_1", nil)
	mustOK(e.t, err, "StartDeploymentRun")
	equal(e.t, "SessionID", st.SessionID, "sesn_1")
	// The first start wins: a repeated start (recovery) keeps it.
	st, err = e.s.StartDeploymentRun(e.ctx, "drun_1", "", json.RawMessage(`{"type":"unknown_error","message":"x"}`))
	mustOK(e.t, err, "second StartDeploymentRun")
	equal(e.t, "SessionID after second start", st.SessionID, "sesn_1")
	equal(e.t, "Error after second start", len(st.Error), 0)
	un, err = e.s.UnstartedDeploymentRuns(e.ctx)
	mustOK(e.t, err, "UnstartedDeploymentRuns")
	equal(e.t, "unstarted runs after start", len(un), 0)
}

func testDeplList(e *mgEnv) {
	a := e.deployment("depl_a", nil)
	b := e.deployment("depl_b", nil)
	b.AgentID, b.PausedReason = "agent_2", json.RawMessage(`{"type":"manual"}`)
	_, err := e.s.PutDeployment(e.ctx, b)
	mustOK(e.t, err, "put b")
	c := e.deployment("depl_c", nil)
	now := time.Now()
	c.ArchivedAt = &now
	_, err = e.s.PutDeployment(e.ctx, c)
	mustOK(e.t, err, "archive c")
	count := func(p store.ListDeploymentsParams) int {
		p.TenantID = mgTenant
		l, err := e.s.ListDeployments(e.ctx, p)
		mustOK(e.t, err, "ListDeployments")
		return len(l)
	}
	yes, no := true, false
	equal(e.t, "default list", count(store.ListDeploymentsParams{}), 2)
	equal(e.t, "include archived", count(store.ListDeploymentsParams{ListResourcesParams: store.ListResourcesParams{IncludeArchived: true}}), 3)
	equal(e.t, "paused", count(store.ListDeploymentsParams{Paused: &yes}), 1)
	equal(e.t, "active", count(store.ListDeploymentsParams{Paused: &no}), 1)
	equal(e.t, "agent_2", count(store.ListDeploymentsParams{ListResourcesParams: store.ListResourcesParams{AgentID: "agent_2"}}), 1)
	equal(e.t, "after depl_a", count(store.ListDeploymentsParams{ListResourcesParams: store.ListResourcesParams{AfterID: a.ID}}), 1)
	other, err := e.s.ListDeployments(e.ctx, store.ListDeploymentsParams{ListResourcesParams: store.ListResourcesParams{TenantID: "other"}})
	mustOK(e.t, err, "other tenant's list")
	equal(e.t, "other tenant's list", len(other), 0)

	for i, x := range []struct {
		id, trig string
		err      bool
	}{{"drun_a", store.TriggerManual, false}, {"drun_b", store.TriggerSchedule, true}} {
		_, err := e.s.InsertDeploymentRun(e.ctx, &store.DeploymentRun{ID: x.id, TenantID: mgTenant, DeploymentID: a.ID,
			Agent: json.RawMessage(`{}`), Trigger: x.trig, CreatedAt: sbAt(time.Duration(i) * time.Second)})
		mustOK(e.t, err, "InsertDeploymentRun")
		var errDoc json.RawMessage
		sess := "sesn_" + x.id
		if x.err {
			errDoc, sess = json.RawMessage(`{"type":"unknown_error","message":"boom"}`), ""
		}
		_, err = e.s.StartDeploymentRun(e.ctx, x.id, sess, errDoc)
		mustOK(e.t, err, "StartDeploymentRun")
	}
	runs := func(p store.ListDeploymentRunsParams) int {
		p.TenantID = mgTenant
		l, err := e.s.ListDeploymentRuns(e.ctx, p)
		mustOK(e.t, err, "ListDeploymentRuns")
		return len(l)
	}
	equal(e.t, "all runs", runs(store.ListDeploymentRunsParams{}), 2)
	equal(e.t, "runs with error", runs(store.ListDeploymentRunsParams{HasError: &yes}), 1)
	equal(e.t, "runs without error", runs(store.ListDeploymentRunsParams{HasError: &no}), 1)
	equal(e.t, "manual runs", runs(store.ListDeploymentRunsParams{Trigger: store.TriggerManual}), 1)
	equal(e.t, "runs of depl_b", runs(store.ListDeploymentRunsParams{DeploymentID: b.ID}), 0)
}
