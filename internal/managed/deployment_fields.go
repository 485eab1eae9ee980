package managed

import (
	"context"
	"encoding/json"

	"github.com/agentkernel/agentkernel/internal/ids"
)

// applyDeployment reads a create (create) or update body onto d, then
// checks the session recipe d now holds through the session create path.
func (s *Service) applyDeployment(ctx context.Context, tenantID string, in Obj, d *deploymentDoc, create bool) error {
	err := firstErr(
		s.applyDeploymentAgent(ctx, tenantID, in, d, create),
		applyRequiredStr(in, "environment_id", &d.EnvironmentID, create, 0),
		applyRequiredStr(in, "name", &d.Name, create, maxDeploymentName),
		applyInitialEvents(in, d, create),
		applyDescription(in, d),
		applyResources(in, d),
		applyDeploymentVaults(in, d),
		applySchedule(in, d),
		in.NotYetUnlessEmpty("budget", "agentkernel does not price model usage, so no budget can stop a session; send null or leave it out"),
	)
	if err != nil {
		return err
	}
	if create || in.Has("metadata") {
		if d.Metadata, err = in.MetadataPatch("metadata", d.Metadata, false); err != nil {
			return err
		}
	}
	if err := in.Strict(); err != nil {
		return err
	}
	body, err := d.sessionBody(d.Agent)
	if err != nil {
		return err
	}
	_, err = s.createSession(ctx, tenantID, body, sessionCreate{id: ids.New("sesn"), checkOnly: true})
	return err
}

// applyDeploymentAgent pins the agent: an id string pins its latest
// version, an object {type: "agent", id, version} that version.
func (s *Service) applyDeploymentAgent(ctx context.Context, tenantID string, in Obj, d *deploymentDoc, create bool) error {
	if !create && !in.Has("agent") {
		return nil
	}
	if !create && in.Null("agent") {
		return badRequest("field \"agent\" cannot be cleared; send an agent id or leave it out")
	}
	ref, err := parseAgentRef(in)
	if err != nil {
		return err
	}
	if len(ref.overrides.Map()) > 0 {
		return in.NotYet("agent", "a deployment runs an agent version as it is; agent_with_overrides is for sessions")
	}
	a, err := s.Agent(ctx, tenantID, ref.id, ref.version)
	if err != nil {
		return err
	}
	if a.ArchivedAt != nil {
		return conflict("field \"agent\": agent %q is archived; archived agents cannot be deployed", a.ID)
	}
	d.Agent = pinnedAgent{ID: a.ID, Version: a.Version}
	return nil
}

// applyRequiredStr reads a string that is required on create and cannot
// be cleared on update; max > 0 bounds its length.
func applyRequiredStr(in Obj, k string, dst *string, create bool, max int) error {
	if !create && !in.Has(k) {
		return nil
	}
	v, err := in.ReqStr(k)
	if err == nil && v == "" {
		err = badRequest("field %q must not be empty", k)
	}
	if err == nil && max > 0 {
		err = in.LimitLen(k, v, max)
	}
	if err == nil {
		*dst = v
	}
	return err
}

func applyInitialEvents(in Obj, d *deploymentDoc, create bool) error {
	if !create && !in.Has("initial_events") {
		return nil
	}
	if !in.Set("initial_events") {
		return badRequest("field \"initial_events\" is required: at least 1 event, at most %d", maxInitialEvents)
	}
	list, err := in.Array("initial_events")
	if err != nil {
		return err
	}
	if len(list) == 0 || len(list) > maxInitialEvents {
		return badRequest("field \"initial_events\" has %d events; send at least 1 and at most %d", len(list), maxInitialEvents)
	}
	d.InitialEvents = append(json.RawMessage(nil), in.Raw("initial_events")...)
	return nil
}

func applyDescription(in Obj, d *deploymentDoc) error {
	v, err := in.Str("description") // null and "" clear it
	if err == nil {
		err = in.LimitLen("description", v, maxDeploymentDescription)
	}
	if err == nil && in.Has("description") {
		d.Description = v
	}
	return err
}

// applyResources keeps the resources as sent (the session create path
// checks them). A repository token is refused: a deployment would have to
// keep it for every future run.
func applyResources(in Obj, d *deploymentDoc) error {
	if !in.Has("resources") {
		return nil
	}
	d.Resources = nil
	if in.Null("resources") {
		return nil
	}
	list, err := in.Objects("resources")
	if err != nil {
		return err
	}
	for _, o := range list {
		if o.Set("authorization_token") {
			return o.NotYet("authorization_token", "a deployment does not keep repository tokens; mount public repositories or use a session")
		}
		for _, k := range o.Keys() {
			o.Has(k) // checked by the session create path
		}
	}
	if len(list) > 0 {
		d.Resources = append(json.RawMessage(nil), in.Raw("resources")...)
	}
	return nil
}

func applyDeploymentVaults(in Obj, d *deploymentDoc) error {
	if !in.Has("vault_ids") {
		return nil
	}
	list, err := in.Strings("vault_ids")
	if err == nil && len(list) > maxDeploymentVaults {
		err = badRequest("field \"vault_ids\" has %d vaults; the limit is %d", len(list), maxDeploymentVaults)
	}
	if err == nil {
		d.VaultIDs = list
	}
	return err
}

// applySchedule reads the cron schedule; null clears it (manual only).
func applySchedule(in Obj, d *deploymentDoc) error {
	if !in.Has("schedule") {
		return nil
	}
	if in.Null("schedule") {
		d.Schedule = nil
		return nil
	}
	o, _, err := in.Object("schedule")
	if err != nil {
		return err
	}
	typ, err := o.Str("type")
	if err == nil && typ != "" && typ != "cron" {
		err = badRequest("field \"schedule.type\" must be \"cron\", got %q", typ)
	}
	var sc scheduleDoc
	if err == nil {
		sc.Expression, err = o.ReqStr("expression")
	}
	if err == nil {
		sc.Timezone, err = o.ReqStr("timezone")
	}
	if err == nil {
		_, err = parseSchedule("schedule", sc.Expression, sc.Timezone)
	}
	if err == nil {
		d.Schedule = &sc
	}
	return err
}
