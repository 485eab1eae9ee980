package agentkernel

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Sessions are Managed Agents sessions; the official Anthropic SDKs drive
// everything the Managed Agents API has (create, events, stream). This
// service holds what only agentkernel has: fork and rewind a session with
// its workspace, its abandoned branches and its history.

// Session is a Managed Agents session as fork and rewind return it; Raw is
// the whole object (BetaManagedAgentsSession's shape plus "lineage").
type Session struct {
	ID      string          `json:"id"`
	Status  string          `json:"status"`
	Lineage *SessionLineage `json:"lineage"`
	Raw     json.RawMessage `json:"-"`
}

// UnmarshalJSON keeps the raw object.
func (s *Session) UnmarshalJSON(b []byte) error {
	type plain Session
	if err := json.Unmarshal(b, (*plain)(s)); err != nil {
		return err
	}
	s.Raw = append(json.RawMessage(nil), b...)
	return nil
}

// SessionLineage is how a session came to be: forked from another, or an
// abandoned branch a rewind cut off.
type SessionLineage struct {
	ForkedFrom *LineagePoint `json:"forked_from,omitempty"`
	BranchOf   *LineagePoint `json:"branch_of,omitempty"`
}

// LineagePoint names a session and the event (by its sequence number) a
// fork or a rewind started from.
type LineagePoint struct {
	SessionID  string     `json:"session_id"`
	AtSeq      int64      `json:"at_seq"`
	BranchedAt *time.Time `json:"branched_at,omitempty"`
}

// RewindResult is the rewound session and the branch that keeps what the
// rewind cut off.
type RewindResult struct {
	Session Session `json:"session"`
	Branch  Session `json:"branch"`
}

// SessionTurn is one turn of a session's history.
type SessionTurn struct {
	ID        string          `json:"id"`
	Seq       int64           `json:"seq"`
	Status    string          `json:"status"`
	StartedAt time.Time       `json:"started_at"`
	EndedAt   *time.Time      `json:"ended_at"`
	Error     string          `json:"error"`
	Usage     json.RawMessage `json:"usage"`
	// Workspace is the workspace snapshot the turn ended at.
	Workspace string `json:"workspace"`
}

// SessionBranch is an abandoned branch as the history lists it.
type SessionBranch struct {
	ID          string     `json:"id"`
	BranchAtSeq int64      `json:"branch_at_seq"`
	BranchedAt  *time.Time `json:"branched_at"`
	Workspace   string     `json:"workspace"`
}

// SessionHistory is what a session went through.
type SessionHistory struct {
	SessionID string          `json:"session_id"`
	Lineage   *SessionLineage `json:"lineage"`
	Turns     []SessionTurn   `json:"turns"`
	Branches  []SessionBranch `json:"branches"`
}

// SessionsService forks and rewinds sessions.
type SessionsService struct{ c *Client }

// Fork creates a session whose transcript is id's up to eventID ("" for
// the latest event) and whose workspace is id's as it was there.
func (s *SessionsService) Fork(ctx context.Context, id, eventID string) (*Session, error) {
	var out Session
	body := map[string]any{}
	if eventID != "" {
		body["event_id"] = eventID
	}
	if err := s.c.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(id)+"/fork", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Rewind takes the session back to eventID; the events after it are kept
// as an abandoned branch. The session must be idle.
func (s *SessionsService) Rewind(ctx context.Context, id, eventID string) (*RewindResult, error) {
	var out RewindResult
	if err := s.c.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(id)+"/rewind", map[string]any{"event_id": eventID}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Branches lists a session's abandoned branches, oldest first.
func (s *SessionsService) Branches(ctx context.Context, id string) ([]Session, error) {
	var out struct {
		Data []Session `json:"data"`
	}
	if err := s.c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id)+"/branches", nil, &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}

// History returns a session's lineage, turns and branches.
func (s *SessionsService) History(ctx context.Context, id string) (*SessionHistory, error) {
	var out SessionHistory
	if err := s.c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id)+"/history", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
