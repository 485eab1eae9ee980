package managed

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// A run is claimed (its row written) before its session is created, and
// the session's id is derived from the run's: starting a run again after
// a crash finds the session the first start made, so a run never has two.

// runSessionID is the id of the session run runID creates.
func runSessionID(runID string) string {
	return "sesn_" + strings.TrimPrefix(runID, "drun_")
}

// RunDeployment runs a deployment now (a manual run), paused or not.
func (s *Service) RunDeployment(ctx context.Context, tenantID, id string) (map[string]any, error) {
	row, d, err := s.deployment(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	if row.ArchivedAt != nil {
		return nil, conflict("deployment %q is archived; archived deployments cannot run", id)
	}
	run, err := s.depl.InsertDeploymentRun(ctx, &store.DeploymentRun{ID: ids.New("drun"), TenantID: tenantID,
		DeploymentID: row.ID, Agent: MustJSON(d.Agent), Trigger: store.TriggerManual, CreatedAt: s.clock()})
	if err != nil {
		return nil, err
	}
	if run, err = s.startRun(ctx, run); err != nil {
		return nil, err
	}
	return deploymentRunJSON(run), nil
}

// startRun creates the run's session through the session create path and
// records it, or records why it could not be created. An error that is
// not the request's (the store failed) leaves the run unstarted for the
// scheduler to start again.
func (s *Service) startRun(ctx context.Context, run *store.DeploymentRun) (*store.DeploymentRun, error) {
	if run.Started() {
		return run, nil
	}
	sessionID := runSessionID(run.ID)
	if _, err := s.st.GetManagedSession(ctx, sessionID); err == nil {
		return s.depl.StartDeploymentRun(ctx, run.ID, sessionID, nil) // made before a crash
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	var agent pinnedAgent
	_ = jsonUnmarshal(run.Agent, &agent)
	row, err := s.depl.GetDeployment(ctx, run.DeploymentID)
	if err != nil {
		return nil, err
	}
	d, err := decodeDeploymentDoc(row.Doc)
	if err != nil {
		return nil, err
	}
	body, err := d.sessionBody(agent)
	if err == nil {
		_, err = s.createSession(ctx, run.TenantID, body, sessionCreate{id: sessionID, deploymentID: row.ID})
	}
	if err == nil || errors.Is(err, store.ErrAlreadyExists) {
		return s.depl.StartDeploymentRun(ctx, run.ID, sessionID, nil)
	}
	var ie *InputError
	if !errors.As(err, &ie) {
		return nil, err
	}
	s.log.Warn("deployment run could not create its session", "deployment", row.ID, "run", run.ID, "err", err)
	typ := runErrorType(ie)
	out, err := s.depl.StartDeploymentRun(ctx, run.ID, "", MustJSON(map[string]string{"type": typ, "message": ie.Msg}))
	if err == nil && run.Trigger == store.TriggerSchedule && pausingErrors[typ] {
		// Every later fire would fail the same way until someone fixes
		// the deployment: pause it, saying why (the SDK's error reason).
		reason := MustJSON(map[string]any{"type": "error", "error": map[string]string{"type": typ}})
		_, perr := s.changeDeployment(ctx, run.TenantID, row.ID, func(r *store.Deployment, _ *deploymentDoc) error {
			if r.PausedReason == nil && r.ArchivedAt == nil {
				r.PausedReason = reason
			}
			return nil
		})
		if perr != nil {
			s.log.Warn("deployment could not be paused after a failed run", "deployment", row.ID, "err", perr)
		}
	}
	return out, err
}

// pausingErrors are the run errors that pause a scheduled deployment:
// what it names is gone or archived, so every later fire would fail too.
var pausingErrors = map[string]bool{
	"agent_archived_error": true, "environment_archived_error": true, "environment_not_found_error": true,
	"vault_not_found_error": true, "file_not_found_error": true,
}

// runErrorType names a refused session create as the SDK's run errors do.
func runErrorType(ie *InputError) string {
	field := strings.SplitN(ie.Field, "[", 2)[0]
	// An archived agent or environment is a 409 whose message ends by
	// naming the field.
	names := func(f string) bool { return field == f || strings.HasSuffix(ie.Msg, "(field \""+f+"\")") }
	switch {
	case names("agent") && ie.Status == http.StatusConflict:
		return "agent_archived_error"
	case names("environment_id") && ie.Status == http.StatusConflict:
		return "environment_archived_error"
	case strings.Contains(ie.Msg, "environment") && ie.Status == http.StatusNotFound:
		return "environment_not_found_error"
	case strings.Contains(ie.Msg, "vault") && ie.Status == http.StatusNotFound:
		return "vault_not_found_error"
	case strings.Contains(ie.Msg, "file") && ie.Status == http.StatusNotFound:
		return "file_not_found_error"
	}
	return "session_creation_rejected_error"
}

// GetDeploymentRun renders a run the tenant owns.
func (s *Service) GetDeploymentRun(ctx context.Context, tenantID, id string) (map[string]any, error) {
	r, err := s.depl.GetDeploymentRun(ctx, id)
	if err == nil && r.TenantID != tenantID {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, notFoundAs("deployment run", id, err)
	}
	return deploymentRunJSON(r), nil
}

// ListDeploymentRuns lists the tenant's started runs.
func (s *Service) ListDeploymentRuns(ctx context.Context, tenantID string, p store.ListDeploymentRunsParams) ([]*store.DeploymentRun, error) {
	p.TenantID = tenantID
	return s.depl.ListDeploymentRuns(ctx, p)
}

// DeploymentRunJSON renders a stored run.
func DeploymentRunJSON(r *store.DeploymentRun) map[string]any { return deploymentRunJSON(r) }
