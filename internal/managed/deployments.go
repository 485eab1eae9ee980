package managed

import (
	"context"
	"errors"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// This file holds the deployments API (issue 14): create, read, update,
// list, archive, pause and unpause. A deployment stores the recipe of a
// session (checked in full by the session create path when stored) and an
// optional cron schedule whose next fire is kept on its row.

// HasDeployments reports whether the store keeps deployments.
func (s *Service) HasDeployments() bool { return s.depl != nil }

// deployment reads a deployment the tenant owns.
func (s *Service) deployment(ctx context.Context, tenantID, id string) (*store.Deployment, deploymentDoc, error) {
	row, err := s.depl.GetDeployment(ctx, id)
	if err == nil && row.TenantID != tenantID {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, deploymentDoc{}, notFoundAs("deployment", id, err)
	}
	d, err := decodeDeploymentDoc(row.Doc)
	return row, d, err
}

// DeploymentJSON renders a stored deployment.
func (s *Service) DeploymentJSON(row *store.Deployment) (map[string]any, error) {
	d, err := decodeDeploymentDoc(row.Doc)
	if err != nil {
		return nil, err
	}
	return deploymentJSON(row, d, s.clock()), nil
}

// CreateDeployment stores a deployment; its session recipe is checked as
// POST /v1/sessions checks one, so a run never fails on what was sent.
func (s *Service) CreateDeployment(ctx context.Context, tenantID string, in Obj) (map[string]any, error) {
	var d deploymentDoc
	if err := s.applyDeployment(ctx, tenantID, in, &d, true); err != nil {
		return nil, err
	}
	row := &store.Deployment{ID: ids.New("depl"), TenantID: tenantID, AgentID: d.Agent.ID, Doc: MustJSON(d)}
	next, err := nextFire(row, d, s.clock())
	if err != nil {
		return nil, err
	}
	row.NextFireAt = next
	out, err := s.depl.CreateDeployment(ctx, row)
	if err != nil {
		return nil, err
	}
	return deploymentJSON(out, d, s.clock()), nil
}

// GetDeployment renders a deployment the tenant owns.
func (s *Service) GetDeployment(ctx context.Context, tenantID, id string) (map[string]any, error) {
	row, d, err := s.deployment(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	return deploymentJSON(row, d, s.clock()), nil
}

// ListDeployments lists the tenant's deployments.
func (s *Service) ListDeployments(ctx context.Context, tenantID string, p store.ListDeploymentsParams) ([]*store.Deployment, error) {
	p.TenantID = tenantID
	return s.depl.ListDeployments(ctx, p)
}

// UpdateDeployment applies an update body: omitted fields are kept.
func (s *Service) UpdateDeployment(ctx context.Context, tenantID, id string, in Obj) (map[string]any, error) {
	return s.changeDeployment(ctx, tenantID, id, func(row *store.Deployment, d *deploymentDoc) error {
		if row.ArchivedAt != nil {
			return conflict("deployment %q is archived; archived deployments cannot be updated", id)
		}
		return s.applyDeployment(ctx, tenantID, in, d, false)
	})
}

// ArchiveDeployment archives a deployment: it fires no more and is
// read-only. Archiving twice keeps the first archive.
func (s *Service) ArchiveDeployment(ctx context.Context, tenantID, id string) (map[string]any, error) {
	return s.changeDeployment(ctx, tenantID, id, func(row *store.Deployment, _ *deploymentDoc) error {
		if row.ArchivedAt == nil {
			now := s.clock()
			// The SDK: archived deployments report active, archived_at set.
			row.ArchivedAt, row.PausedReason = &now, nil
		}
		return nil
	})
}

// PauseDeployment stops its schedule until unpaused (manual runs still
// run). Pausing a paused deployment keeps it paused.
func (s *Service) PauseDeployment(ctx context.Context, tenantID, id string) (map[string]any, error) {
	return s.changeDeployment(ctx, tenantID, id, func(row *store.Deployment, _ *deploymentDoc) error {
		if row.ArchivedAt != nil {
			return conflict("deployment %q is archived; archived deployments cannot be paused", id)
		}
		if row.PausedReason == nil {
			row.PausedReason = manualPause
		}
		return nil
	})
}

// UnpauseDeployment resumes its schedule from now: fires missed while
// paused are not made up.
func (s *Service) UnpauseDeployment(ctx context.Context, tenantID, id string) (map[string]any, error) {
	return s.changeDeployment(ctx, tenantID, id, func(row *store.Deployment, _ *deploymentDoc) error {
		if row.ArchivedAt != nil {
			return conflict("deployment %q is archived; archived deployments cannot be unpaused", id)
		}
		row.PausedReason = nil
		return nil
	})
}

// changeDeployment reads, changes and writes a deployment, its next fire
// recomputed; a claim between the read and the write (the version moved)
// makes it read again, so an update never puts back a fired time.
func (s *Service) changeDeployment(ctx context.Context, tenantID, id string, change func(*store.Deployment, *deploymentDoc) error) (map[string]any, error) {
	for attempt := 0; ; attempt++ {
		row, d, err := s.deployment(ctx, tenantID, id)
		if err != nil {
			return nil, err
		}
		wasPaused, wasSchedule := row.PausedReason != nil, d.Schedule
		if err := change(row, &d); err != nil {
			return nil, err
		}
		// The pending fire stays when nothing about the schedule changed
		// (an update of the name does not move it); otherwise it is
		// computed from now.
		if row.ArchivedAt != nil || row.PausedReason != nil || d.Schedule == nil {
			row.NextFireAt = nil
		} else if wasPaused || wasSchedule == nil || *wasSchedule != *d.Schedule || row.NextFireAt == nil {
			if row.NextFireAt, err = nextFire(row, d, s.clock()); err != nil {
				return nil, err
			}
		}
		row.AgentID, row.Doc = d.Agent.ID, MustJSON(d)
		out, err := s.depl.PutDeployment(ctx, row)
		if errors.Is(err, store.ErrVersionMismatch) && attempt < 5 {
			continue
		}
		if err != nil {
			return nil, err
		}
		return deploymentJSON(out, d, s.clock()), nil
	}
}
