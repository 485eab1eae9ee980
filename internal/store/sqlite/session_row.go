package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// querier is what the read and write pools and a write transaction share.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

const sessionCols = `id, tenant_id, agent_type, status, step_count, resume_count, version,
	custom_state, runtime, error, failure_reason, interrupt_context,
	checkpoint_id, checkpointed_at, checkpoint_source, parent_session_id, root_session_id,
	metadata, tags, expires_at, created_at, updated_at`

type scanner interface{ Scan(dest ...any) error }

func scanSession(r scanner) (*store.Session, error) {
	var (
		s                            store.Session
		custom, runtime              string
		interruptCtx, metadata, tags sql.NullString
		checkpointedAt, expiresAt    sql.NullInt64
		createdAt, updatedAt         int64
		status, cpSource             string
	)
	err := r.Scan(&s.ID, &s.TenantID, &s.AgentType, &status, &s.StepCount, &s.ResumeCount, &s.Version,
		&custom, &runtime, &s.Error, &s.FailureReason, &interruptCtx,
		&s.CheckpointID, &checkpointedAt, &cpSource, &s.ParentSessionID, &s.RootSessionID,
		&metadata, &tags, &expiresAt, &createdAt, &updatedAt)
	if err != nil {
		return nil, err
	}
	s.Status = store.SessionStatus(status)
	s.CheckpointSource = store.CheckpointSource(cpSource)
	s.CustomState = json.RawMessage(custom)
	s.Runtime = json.RawMessage(runtime)
	s.InterruptContext = rawOrNil(interruptCtx)
	s.CheckpointedAt = timePtr(checkpointedAt)
	s.ExpiresAt = timePtr(expiresAt)
	s.CreatedAt = fromMicros(createdAt)
	s.UpdatedAt = fromMicros(updatedAt)
	if s.Metadata, err = decodeMap(metadata); err != nil {
		return nil, err
	}
	if s.Tags, err = decodeTags(tags); err != nil {
		return nil, err
	}
	return &s, nil
}

// loadSession reads one session; ErrNotFound when absent.
func loadSession(ctx context.Context, q querier, id string) (*store.Session, error) {
	s, err := scanSession(q.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: load session %q: %w", id, err)
	}
	return s, nil
}

// requireSession returns ErrNotFound unless the session exists.
func requireSession(ctx context.Context, q querier, id string) error {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("sqlite: look up session %q: %w", id, err)
	}
	return nil
}

func requireID(field, v string) error {
	if v == "" {
		return fmt.Errorf("%s is required: %w", field, store.ErrInvalid)
	}
	return nil
}

// stateOf is the writable part of a session, as snapshotted by checkpoints.
func stateOf(s *store.Session) store.SessionState {
	return store.SessionState{
		Status:           s.Status,
		CustomState:      s.CustomState,
		Runtime:          s.Runtime,
		StepCount:        s.StepCount,
		Error:            s.Error,
		FailureReason:    s.FailureReason,
		InterruptContext: s.InterruptContext,
		Metadata:         s.Metadata,
		Tags:             s.Tags,
		ExpiresAt:        s.ExpiresAt,
	}
}

// encodedState is a SessionState validated and encoded for the sessions row.
type encodedState struct {
	status, custom, runtime string
	errText, failureReason  string
	interruptCtx            sql.NullString
	metadata, tags          sql.NullString
	expiresAt               sql.NullInt64
}

func encodeState(st store.SessionState) (encodedState, error) {
	var e encodedState
	if !st.Status.Valid() {
		return e, fmt.Errorf("status %q is not a session status: %w", st.Status, store.ErrInvalid)
	}
	var err error
	if e.custom, err = jsonObject("custom state", st.CustomState, "{}"); err != nil {
		return e, err
	}
	if e.runtime, err = jsonObject("runtime state", st.Runtime, "{}"); err != nil {
		return e, err
	}
	if e.interruptCtx, err = jsonValue("interrupt context", st.InterruptContext); err != nil {
		return e, err
	}
	e.status = string(st.Status)
	e.errText, e.failureReason = st.Error, st.FailureReason
	e.metadata = encodeMap(st.Metadata)
	e.tags = encodeTags(st.Tags)
	e.expiresAt = nullMicros(st.ExpiresAt)
	return e, nil
}
