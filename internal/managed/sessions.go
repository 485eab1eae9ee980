package managed

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/resources"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Runner runs the turns of Managed Agents sessions. The service only
// records what clients send; the runner acts on it.
type Runner interface {
	// Wake tells the runner that user events were appended to the session
	// (it drains the session's queue; it must not block the request).
	Wake(sessionID string)
	// Destroy runs the seed's destroy sequence: terminated_at set, the
	// running turn aborted, a final workspace snapshot, the sandbox
	// destroyed. The service deletes the session afterwards.
	Destroy(ctx context.Context, tenantID, sessionID string) error
}

// maxSendEvents bounds one send request.
const maxSendEvents = 50

// Session reads a session the tenant owns; another tenant's answers
// exactly like a missing one.
func (s *Service) Session(ctx context.Context, tenantID, id string) (*store.ManagedSession, error) {
	ms, err := s.st.GetManagedSession(ctx, id)
	if err == nil && (ms.TenantID != tenantID || ms.ThreadOf != "") {
		// A thread is reached through its session's threads endpoints.
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, notFoundAs("session", id, err)
	}
	return ms, nil
}

// status derives a session's status from the store's facts (seed 000).
func (s *Service) status(ctx context.Context, ms *store.ManagedSession) (string, error) {
	rr, err := s.st.GetRunRow(ctx, ms.ID)
	if errors.Is(err, store.ErrNotFound) {
		rr, err = nil, nil
	}
	if err != nil {
		return "", err
	}
	return session.DeriveStatus(ms, rr), nil
}

// SessionJSON renders a session as the SDK's BetaManagedAgentsSession,
// with its status and resources as they are now.
func (s *Service) SessionJSON(ctx context.Context, ms *store.ManagedSession) (map[string]any, error) {
	d, err := s.sessionDocFor(ctx, ms)
	if err != nil {
		return nil, err
	}
	st, err := s.status(ctx, ms)
	if err != nil {
		return nil, err
	}
	out := sessionJSON(ms, d, st, s.clock())
	return out, s.addOutcomes(ctx, out, ms.ID)
}

// addOutcomes fills a rendered session's outcome_evaluations from its
// events.
func (s *Service) addOutcomes(ctx context.Context, out map[string]any, id string) error {
	evs, err := s.outcomeEvents(ctx, id)
	if err != nil {
		return err
	}
	out["outcome_evaluations"] = session.OutcomeEvaluations(evs)
	return nil
}

// GetSession renders a session the tenant owns.
func (s *Service) GetSession(ctx context.Context, tenantID, id string) (map[string]any, error) {
	ms, err := s.Session(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	return s.SessionJSON(ctx, ms)
}

// CreateSession creates a session from a create body: the agent version
// it runs (with its overrides), its environment, vaults, resources and
// initial events, checked in full before anything is written.
func (s *Service) CreateSession(ctx context.Context, tenantID string, in Obj) (map[string]any, error) {
	return s.createSession(ctx, tenantID, in, sessionCreate{id: ids.New("sesn")})
}

// sessionCreate is how a session is created: its id, the deployment that
// made it (if one did), or only checked (a deployment's recipe is checked
// this way when stored, so a bad one is refused then, not at each fire).
type sessionCreate struct {
	id           string
	deploymentID string
	checkOnly    bool
}

// createSession is the one way a session is created (POST /v1/sessions
// and deployment runs).
func (s *Service) createSession(ctx context.Context, tenantID string, in Obj, o sessionCreate) (map[string]any, error) {
	ref, err := parseAgentRef(in)
	if err != nil {
		return nil, err
	}
	envID, err := in.ReqStr("environment_id")
	if err != nil {
		return nil, err
	}
	agent, err := s.Agent(ctx, tenantID, ref.id, ref.version)
	if err != nil {
		return nil, err
	}
	if agent.ArchivedAt != nil {
		return nil, conflict("agent %q is archived; archived agents cannot start sessions (field \"agent\")", ref.id)
	}
	env, err := s.Environment(ctx, tenantID, envID)
	if err != nil {
		return nil, err
	}
	if env.ArchivedAt != nil {
		return nil, conflict("environment %q is archived; archived environments cannot start sessions (field \"environment_id\")", envID)
	}
	snap, err := s.sessionAgent(ctx, tenantID, agent, ref.overrides)
	if err != nil {
		return nil, err
	}
	selfHosted := session.SelfHosted(env)
	if selfHosted {
		if err := refuseSelfHostedExtras(in); err != nil {
			return nil, err
		}
	}
	d := sessionDoc{Agent: snap, DeploymentID: o.deploymentID}
	if err := firstErr(applySessionFields(in, &d, true), refuseSessionExtras(in), s.applyVaultIDs(ctx, in, &d, tenantID)); err != nil {
		return nil, err
	}
	sessionID := o.id
	rs, err := s.buildSessionResources(ctx, tenantID, in, sessionID)
	if err != nil {
		return nil, err
	}
	initial, err := in.Objects("initial_events")
	if err == nil && len(initial) > maxInitialEvents {
		err = badRequest("field \"initial_events\" has %d events; the limit is %d", len(initial), maxInitialEvents)
	}
	var evs []store.NewEvent
	if err == nil {
		evs, _, err = s.buildEvents(ctx, nil, initial, true)
	}
	if err == nil {
		err = in.Strict()
	}
	if err != nil || o.checkOnly {
		return nil, err
	}
	// The session, its resources and its initial events are one
	// transaction: a crash never leaves a session without what it was
	// created with.
	ms, stored, rs, err := s.st.CreateManagedSessionWith(ctx, store.NewManagedSession{
		Session: store.ManagedSession{ID: sessionID, TenantID: tenantID, AgentID: agent.ID, AgentVersion: agent.Version,
			EnvironmentID: env.ID, Doc: MustJSON(d)},
		Resources: rs, Events: evs,
	})
	if err != nil {
		return nil, resourcesErr(err)
	}
	if len(rs) > 0 {
		list := make([]map[string]any, 0, len(rs))
		for _, x := range rs {
			list = append(list, resources.Render(x))
		}
		d.Resources = MustJSON(list)
	}
	if len(stored) > 0 {
		s.events.Publish(ms.ID, stored)
		s.wake(ms.ID)
	}
	if selfHosted {
		// A worker of the environment serves it from now on. Should the
		// daemon die before this, its first turn that waits for a worker
		// queues the work.
		if err := s.work.EnsureSession(ctx, ms); err != nil {
			return nil, err
		}
	}
	out := sessionJSON(ms, d, session.StatusIdle, s.clock())
	out["outcome_evaluations"] = session.OutcomeEvaluations(stored)
	return out, nil
}

// sessionDocFor is the session's doc with its resources as they are now.
func (s *Service) sessionDocFor(ctx context.Context, ms *store.ManagedSession) (sessionDoc, error) {
	d, err := decodeSessionDoc(ms.Doc)
	if err != nil {
		return d, err
	}
	list, err := s.sessionResourcesJSON(ctx, ms.ID)
	if err != nil {
		return d, err
	}
	d.Resources = MustJSON(list)
	return d, nil
}

func (s *Service) wake(sessionID string) {
	if s.runner != nil {
		s.runner.Wake(sessionID)
	}
}

// applySessionFields writes title and metadata from in onto d.
func applySessionFields(in Obj, d *sessionDoc, create bool) error {
	if in.Has("title") {
		d.Title = nil
		if in.Set("title") {
			t, err := in.Str("title")
			if err == nil {
				err = in.LimitLen("title", t, maxSessionTitle)
			}
			if err != nil {
				return err
			}
			d.Title = &t
		}
	}
	if create || in.Has("metadata") {
		md, err := in.MetadataPatch("metadata", d.Metadata, false)
		if err != nil {
			return err
		}
		d.Metadata = md
	}
	return nil
}

// Writable refuses changes to an archived (read-only) or terminated
// session.
func Writable(ms *store.ManagedSession) error {
	switch {
	case ms.TerminatedAt != nil:
		return conflict("session %q is terminated; it accepts no more changes or events", ms.ID)
	case ms.ArchivedAt != nil:
		return conflict("session %q is archived; it is read-only", ms.ID)
	}
	return nil
}

// modifySession applies change to the current session with the store's
// compare-and-set, retrying when the runtime wrote in between.
func (s *Service) modifySession(ctx context.Context, tenantID, id string, change func(*store.ManagedSession) error) (*store.ManagedSession, error) {
	for attempt := 0; ; attempt++ {
		ms, err := s.Session(ctx, tenantID, id)
		if err != nil {
			return nil, err
		}
		if err := change(ms); err != nil {
			return nil, err
		}
		out, err := s.st.UpdateManagedSession(ctx, ms)
		if errors.Is(err, store.ErrVersionMismatch) && attempt < 10 {
			continue
		}
		return out, notFoundAs("session", id, err)
	}
}

// UpdateSession applies an update body: title, metadata, vault_ids, and
// the agent's tools and mcp_servers between turns.
func (s *Service) UpdateSession(ctx context.Context, tenantID, id string, in Obj) (map[string]any, error) {
	ms, err := s.modifySession(ctx, tenantID, id, func(ms *store.ManagedSession) error {
		if err := Writable(ms); err != nil {
			return err
		}
		d, err := decodeSessionDoc(ms.Doc)
		if err != nil {
			return err
		}
		if hosted, err := s.SelfHostedSession(ctx, ms); err != nil {
			return err
		} else if hosted {
			if err := refuseSelfHostedExtras(in); err != nil {
				return err
			}
		}
		if err := firstErr(applySessionFields(in, &d, false), refuseSessionExtras(in), s.applyVaultIDs(ctx, in, &d, ms.TenantID)); err != nil {
			return err
		}
		if ag, ok, err := in.Object("agent"); err != nil {
			return err
		} else if ok {
			if err := s.updateSessionAgent(ctx, ms, &d, ag); err != nil {
				return err
			}
		}
		if err := in.Strict(); err != nil {
			return err
		}
		ms.Doc = MustJSON(d)
		ms.ClientUpdate = true // announced as session.updated with the write
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.SessionJSON(ctx, ms)
}

// updateSessionAgent replaces the snapshot's tools and mcp_servers (the
// only agent fields the SDK lets a session change), between turns only.
func (s *Service) updateSessionAgent(ctx context.Context, ms *store.ManagedSession, d *sessionDoc, ag Obj) error {
	for _, k := range ag.Keys() {
		if k != "tools" && k != "mcp_servers" {
			return badRequest("field %q cannot be updated on a session; only agent.tools and agent.mcp_servers can", ag.Field(k))
		}
	}
	if st, err := s.status(ctx, ms); err != nil {
		return err
	} else if st != session.StatusIdle {
		return conflict("session %q is %s; update its agent while it is idle", ms.ID, st)
	}
	snap, err := updateSessionAgentSnapshot(d.Agent, ag)
	if err != nil {
		return err
	}
	d.Agent = snap
	return nil
}

// ArchiveSession archives an idle session the tenant owns.
func (s *Service) ArchiveSession(ctx context.Context, tenantID, id string) (map[string]any, error) {
	ms, err := s.modifySession(ctx, tenantID, id, func(ms *store.ManagedSession) error {
		if ms.ArchivedAt != nil {
			return nil
		}
		if st, err := s.status(ctx, ms); err != nil {
			return err
		} else if st == session.StatusRunning || st == session.StatusRescheduling {
			return conflict("session %q is %s; send user.interrupt and archive it once it is idle", id, st)
		}
		now := s.clock()
		ms.ArchivedAt = &now
		return nil
	})
	if err != nil {
		return nil, err
	}
	if s.work != nil {
		// An archived session is read-only: no worker serves it.
		if err := s.work.StopSession(ctx, ms.ID); err != nil {
			return nil, err
		}
	}
	return s.SessionJSON(ctx, ms)
}

// DeleteSession runs the destroy sequence through the runner, then
// deletes the session and its events, and ends its event streams.
func (s *Service) DeleteSession(ctx context.Context, tenantID, id string) error {
	if _, err := s.Session(ctx, tenantID, id); err != nil {
		return err
	}
	if s.runner != nil {
		if err := s.runner.Destroy(ctx, tenantID, id); err != nil {
			return notFoundAs("session", id, err)
		}
	}
	if err := s.st.DeleteManagedSession(ctx, id); err != nil {
		return notFoundAs("session", id, err)
	}
	s.events.CloseSession(id)
	if s.resources != nil {
		if err := s.resources.Forget(id); err != nil {
			s.log.WarnContext(ctx, "session resources: remove the host tree", "session", id, "err", err)
		}
	}
	return nil
}

// storedAnswers sorts out a batch the store refused for an id it holds:
// an answer of a call already answered (answerID) takes the stored event
// into out when it says the same, and is a 400 when it does not; what is
// left of the batch (and its request indexes) is returned to append.
func (s *Service) storedAnswers(ctx context.Context, logID string, idx []int, batch []store.NewEvent, out []store.SessionEvent) ([]int, []store.NewEvent, error) {
	var keepIdx []int
	var keep []store.NewEvent
	for j, ev := range batch {
		if ev.Type != EventUserToolResult && ev.Type != EventUserCustomToolResult {
			keepIdx, keep = append(keepIdx, idx[j]), append(keep, ev)
			continue
		}
		old, err := s.st.GetEvent(ctx, logID, ev.ID)
		if errors.Is(err, store.ErrNotFound) {
			keepIdx, keep = append(keepIdx, idx[j]), append(keep, ev)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if !sameAnswer(old.Data, ev.Data) {
			return nil, nil, badRequest("events[%d]: the call already has an answer (event %s) that says otherwise; a call is answered once", idx[j], old.ID)
		}
		out[idx[j]] = *old
	}
	if len(keep) == len(batch) {
		// Nothing here was a stored answer: the refusal is the store's.
		return nil, nil, fmt.Errorf("append to %s: %w", logID, store.ErrAlreadyExists)
	}
	return keepIdx, keep, nil
}

// SendEvents appends the client events of a send body to a writable
// session the tenant owns and wakes its runner. An event for one of its
// child threads (a user.interrupt naming it, a tool result answering its
// call) goes to that thread's own log, and wakes the runner for it.
// A resent answer of a call that is already answered is answered with the
// stored event, not stored twice.
func (s *Service) SendEvents(ctx context.Context, tenantID, id string, in Obj) ([]store.SessionEvent, error) {
	ms, err := s.Session(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	if err := Writable(ms); err != nil {
		return nil, err
	}
	evs, err := in.Objects("events")
	if err == nil && len(evs) == 0 {
		err = badRequest("field \"events\" is required: an array of events such as {\"type\": \"user.message\", \"content\": [{\"type\": \"text\", \"text\": \"…\"}]}")
	}
	if err == nil && len(evs) > maxSendEvents {
		err = badRequest("field \"events\" has %d events; the limit is %d per request", len(evs), maxSendEvents)
	}
	var news []store.NewEvent
	var targets []string
	if err == nil {
		news, targets, err = s.buildEvents(ctx, ms, evs, false)
	}
	if err == nil {
		err = in.Strict()
	}
	if err != nil {
		return nil, err
	}
	// One append per log, in the order each log first appears; the
	// response keeps the request's order.
	var logs []string
	byLog := map[string][]int{}
	for i, t := range targets {
		if t == "" {
			t = id
		}
		if _, ok := byLog[t]; !ok {
			logs = append(logs, t)
		}
		byLog[t] = append(byLog[t], i)
	}
	out := make([]store.SessionEvent, len(news))
	for _, logID := range logs {
		idx := byLog[logID]
		batch := make([]store.NewEvent, len(idx))
		for j, i := range idx {
			batch[j] = news[i]
		}
		stored, err := s.events.Append(ctx, logID, batch)
		if errors.Is(err, store.ErrAlreadyExists) {
			// A resent answer of a call (answerID): the stored one stands.
			if idx, batch, err = s.storedAnswers(ctx, logID, idx, batch, out); err == nil && len(batch) > 0 {
				stored, err = s.events.Append(ctx, logID, batch)
			}
		}
		if err != nil {
			return nil, notFoundAs("session", logID, err)
		}
		for j, i := range idx {
			out[i] = stored[j]
		}
		if len(idx) > 0 {
			s.wake(logID)
		}
	}
	if err := s.ensureWork(ctx, ms); err != nil {
		return nil, err
	}
	return out, nil
}

// ensureWork queues work for a self_hosted session that got events (a
// dormant session's worker has let its work go).
func (s *Service) ensureWork(ctx context.Context, ms *store.ManagedSession) error {
	if s.work == nil || ms.EnvironmentID == "" || ms.ThreadOf != "" {
		return nil
	}
	hosted, err := s.SelfHostedSession(ctx, ms)
	if err != nil || !hosted {
		return err
	}
	return s.work.EnsureSession(ctx, ms)
}

// SelfHostedSession says whether the session's environment is
// self_hosted.
//
// An environment's type is fixed at create, so the answer is kept per
// environment: every event a session is sent asks (ensureWork), and the
// store is read once per environment, not once per send.
func (s *Service) SelfHostedSession(ctx context.Context, ms *store.ManagedSession) (bool, error) {
	if ms.EnvironmentID == "" {
		return false, nil
	}
	if v, ok := s.envHosted.Load(ms.EnvironmentID); ok {
		return v.(bool), nil
	}
	env, err := s.st.GetEnvironment(ctx, ms.EnvironmentID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	hosted := session.SelfHosted(env)
	s.envHosted.Store(ms.EnvironmentID, hosted)
	return hosted, nil
}

// refuseSelfHostedExtras: what a self_hosted session cannot have yet. Its
// sandbox is a worker's directory on another host: the daemon cannot mount
// resources into it, and environment_variable credentials would not reach
// its tool calls.
func refuseSelfHostedExtras(in Obj) error {
	if in.Has("resources") && !in.Null("resources") {
		if rs, err := in.Array("resources"); err != nil || len(rs) > 0 {
			return in.NotYet("resources", "a self_hosted environment's sessions take no resources yet: the daemon cannot mount them into a worker's directory")
		}
	}
	if in.Has("vault_ids") && !in.Null("vault_ids") {
		if vs, err := in.Array("vault_ids"); err != nil || len(vs) > 0 {
			return in.NotYet("vault_ids", "a self_hosted environment's sessions take no vaults yet: their credentials would not reach a worker's tool calls")
		}
	}
	return nil
}

// SessionList lists a tenant's sessions with every run row read once
// (one read per listing instead of one per session).
type SessionList struct {
	svc      *Service
	tenantID string
	runs     map[string]*store.RunRow
}

// Sessions starts a listing of the tenant's sessions.
func (s *Service) Sessions(ctx context.Context, tenantID string) (*SessionList, error) {
	rows, err := s.st.ListRunRows(ctx)
	if err != nil {
		return nil, err
	}
	runs := make(map[string]*store.RunRow, len(rows))
	for _, rr := range rows {
		runs[rr.SessionID] = rr
	}
	return &SessionList{svc: s, tenantID: tenantID, runs: runs}, nil
}

// Page reads sessions of the tenant (p's paging and filters).
func (l *SessionList) Page(ctx context.Context, p store.ListResourcesParams) ([]*store.ManagedSession, error) {
	p.TenantID = l.tenantID
	return l.svc.st.ListManagedSessions(ctx, p)
}

// Status is a listed session's status.
func (l *SessionList) Status(ms *store.ManagedSession) string {
	return session.DeriveStatus(ms, l.runs[ms.ID])
}

// JSON renders listed sessions.
func (l *SessionList) JSON(ctx context.Context, page []*store.ManagedSession) ([]map[string]any, error) {
	out := make([]map[string]any, 0, len(page))
	now := l.svc.clock()
	for _, ms := range page {
		d, err := l.svc.sessionDocFor(ctx, ms)
		if err != nil {
			return nil, err
		}
		js := sessionJSON(ms, d, l.Status(ms), now)
		if err := l.svc.addOutcomes(ctx, js, ms.ID); err != nil {
			return nil, err
		}
		out = append(out, js)
	}
	return out, nil
}
