package managed

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Thread is one of a session's threads (anthropic-sdk-go's
// BetaManagedAgentsSessionThread): the primary thread (Row nil; its log
// is the session's) or a child thread (Row is the thread's own session
// row, with ThreadOf = Session.ID).
type Thread struct {
	Session *store.ManagedSession
	Row     *store.ManagedSession
}

// ID is the thread's id.
func (t Thread) ID() string {
	if t.Row == nil {
		return session.PrimaryThreadID(t.Session.ID)
	}
	return t.Row.ID
}

// LogID is the id of the session whose event log is the thread's: the
// session's own for the primary thread, the thread's row for a child.
func (t Thread) LogID() string {
	if t.Row == nil {
		return t.Session.ID
	}
	return t.Row.ID
}

// Primary reports whether t is the session's primary thread.
func (t Thread) Primary() bool { return t.Row == nil }

// threadNotFound is the 404 for a thread id that is none of the session's.
func threadNotFound(sessionID, threadID string) error {
	return inputErr(http.StatusNotFound, "session thread %q not found in session %q", threadID, sessionID)
}

// threadSession reads the session whose threads are asked for: one the
// tenant owns that is not itself a thread.
func (s *Service) threadSession(ctx context.Context, tenantID, sessionID string) (*store.ManagedSession, error) {
	return s.Session(ctx, tenantID, sessionID)
}

// threadOf resolves threadID among parent's threads: its primary thread or
// a child whose ThreadOf is parent. Anything else is a 404 naming it.
func (s *Service) threadOf(ctx context.Context, parent *store.ManagedSession, threadID string) (Thread, error) {
	if !strings.HasPrefix(threadID, session.ThreadPrefix) {
		return Thread{}, threadNotFound(parent.ID, threadID)
	}
	if threadID == session.PrimaryThreadID(parent.ID) {
		return Thread{Session: parent}, nil
	}
	row, err := s.st.GetManagedSession(ctx, threadID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (row.ThreadOf != parent.ID || row.TenantID != parent.TenantID)) {
		return Thread{}, threadNotFound(parent.ID, threadID)
	}
	if err != nil {
		return Thread{}, err
	}
	return Thread{Session: parent, Row: row}, nil
}

// SessionThread reads one thread of a session the tenant owns.
func (s *Service) SessionThread(ctx context.Context, tenantID, sessionID, threadID string) (Thread, error) {
	parent, err := s.threadSession(ctx, tenantID, sessionID)
	if err != nil {
		return Thread{}, err
	}
	return s.threadOf(ctx, parent, threadID)
}

// SessionThreads lists a session's threads: the primary first, then its
// children oldest first.
func (s *Service) SessionThreads(ctx context.Context, tenantID, sessionID string) ([]Thread, error) {
	parent, err := s.threadSession(ctx, tenantID, sessionID)
	if err != nil {
		return nil, err
	}
	rows, err := s.st.ListSessionThreads(ctx, parent.ID)
	if err != nil {
		return nil, err
	}
	out := make([]Thread, 0, len(rows)+1)
	out = append(out, Thread{Session: parent})
	for _, r := range rows {
		out = append(out, Thread{Session: parent, Row: r})
	}
	return out, nil
}

// ThreadStatus is a thread's status (running, idle, rescheduling or
// terminated): its own session's, and terminated once archived.
func (s *Service) ThreadStatus(ctx context.Context, t Thread) (string, error) {
	ms := t.Session
	if t.Row != nil {
		ms = t.Row
	}
	if ms.ArchivedAt != nil {
		return session.StatusTerminated, nil
	}
	return s.status(ctx, ms)
}

// ThreadJSON renders a thread as the SDK's BetaManagedAgentsSessionThread.
func (s *Service) ThreadJSON(ctx context.Context, t Thread) (map[string]any, error) {
	status, err := s.ThreadStatus(ctx, t)
	if err != nil {
		return nil, err
	}
	ms := t.Session
	var parentThread any
	if t.Row != nil {
		ms = t.Row
		parentThread = session.PrimaryThreadID(t.Session.ID)
	}
	agent, err := s.threadAgent(ctx, ms)
	if err != nil {
		return nil, err
	}
	var archived, usage any
	if ms.ArchivedAt != nil {
		archived = ms.ArchivedAt.UTC()
	}
	if len(ms.Usage) > 0 {
		usage = ms.Usage
	}
	return map[string]any{
		"id": t.ID(), "type": "session_thread", "session_id": t.Session.ID, "parent_thread_id": parentThread,
		"agent": agent, "status": status,
		"created_at": ms.CreatedAt.UTC(), "updated_at": ms.UpdatedAt.UTC(), "archived_at": archived,
		"stats": nil, "usage": usage, "workflow_run_id": nil,
	}, nil
}

// threadAgent is the agent a thread runs, rendered as a session's agent
// field: the snapshot its doc holds, else the agent version it names.
func (s *Service) threadAgent(ctx context.Context, ms *store.ManagedSession) (json.RawMessage, error) {
	if d, err := decodeSessionDoc(orDefault(ms.Doc, json.RawMessage(`{}`))); err == nil && len(d.Agent) > 0 && string(d.Agent) != "null" {
		return d.Agent, nil
	}
	a, err := s.st.GetAgent(ctx, ms.AgentID, ms.AgentVersion)
	if errors.Is(err, store.ErrNotFound) {
		return json.RawMessage(`null`), nil
	}
	if err != nil {
		return nil, err
	}
	ad, err := decodeAgentDoc(a.Doc)
	if err != nil {
		return nil, err
	}
	return agentSnapshot(a, ad), nil
}

// ArchiveThread archives a child thread (and terminates it: an archived
// thread runs no more). The primary thread is the session: archive that.
// An archived thread is returned as it is.
func (s *Service) ArchiveThread(ctx context.Context, tenantID, sessionID, threadID string) (map[string]any, error) {
	t, err := s.SessionThread(ctx, tenantID, sessionID, threadID)
	if err != nil {
		return nil, err
	}
	if t.Primary() {
		return nil, badRequest("session thread %q is the primary thread of session %q; archive the session instead (POST /v1/sessions/%s/archive)", threadID, sessionID, sessionID)
	}
	if t.Row.TerminatedAt == nil && s.runner != nil {
		// The runner stops a turn the thread runs and writes its
		// session.status_terminated (the parent's log shows
		// session.thread_status_terminated).
		if err := s.runner.Destroy(ctx, tenantID, t.Row.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if t, err = s.threadOf(ctx, t.Session, threadID); err != nil {
			return nil, err
		}
	}
	for attempt := 0; t.Row.ArchivedAt == nil; attempt++ {
		row := *t.Row
		now := s.clock()
		row.ArchivedAt = &now
		if row.TerminatedAt == nil {
			row.TerminatedAt = &now
		}
		out, err := s.st.UpdateManagedSession(ctx, &row)
		if err == nil {
			t.Row = out
			break
		}
		if !errors.Is(err, store.ErrVersionMismatch) || attempt >= 10 {
			if errors.Is(err, store.ErrNotFound) {
				return nil, threadNotFound(sessionID, threadID)
			}
			return nil, err
		}
		if t, err = s.threadOf(ctx, t.Session, threadID); err != nil {
			return nil, err
		}
	}
	return s.ThreadJSON(ctx, t)
}

// threadTarget resolves the session_thread_id of a sent event: "" for the
// session itself (its primary thread), else the id of a live child
// thread of parent, whose own log the event goes to.
func (s *Service) threadTarget(ctx context.Context, parent *store.ManagedSession, ev Obj, threadID string) (string, error) {
	field := ev.Field("session_thread_id")
	t, err := s.threadOf(ctx, parent, threadID)
	var ie *InputError
	if errors.As(err, &ie) && ie.Status == http.StatusNotFound {
		return "", inputErr(http.StatusNotFound, "field %q: session %s has no thread %q", field, parent.ID, threadID)
	}
	if err != nil {
		return "", err
	}
	if t.Primary() {
		return "", nil
	}
	switch {
	case t.Row.ArchivedAt != nil:
		return "", conflict("field %q: session thread %q is archived; it accepts no more events", field, threadID)
	case t.Row.TerminatedAt != nil:
		return "", conflict("field %q: session thread %q is terminated; it accepts no more events", field, threadID)
	}
	return t.Row.ID, nil
}
