package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

// querier is what both the pool and a transaction offer.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// sessionCols is the column list scanSession reads, in order.
const sessionCols = `id, tenant_id, agent_type, status, step_count, resume_count, version,
	custom_state, runtime, error, failure_reason, interrupt_context,
	checkpoint_id, checkpointed_at, checkpoint_source, parent_session_id, root_session_id,
	metadata, tags, expires_at, created_at, updated_at, message_count`

// sessionRow is a session plus the engine's own bookkeeping.
type sessionRow struct {
	store.Session
	messageCount int64
}

func scanSession(row pgx.Row) (*sessionRow, error) {
	var (
		r                                    sessionRow
		s                                    = &r.Session
		status, source                       string
		custom, runtime, ictx, metadata, tag []byte
	)
	err := row.Scan(&s.ID, &s.TenantID, &s.AgentType, &status, &s.StepCount, &s.ResumeCount, &s.Version,
		&custom, &runtime, &s.Error, &s.FailureReason, &ictx,
		&s.CheckpointID, &s.CheckpointedAt, &source, &s.ParentSessionID, &s.RootSessionID,
		&metadata, &tag, &s.ExpiresAt, &s.CreatedAt, &s.UpdatedAt, &r.messageCount)
	if err != nil {
		return nil, err
	}
	s.Status = store.SessionStatus(status)
	s.CheckpointSource = store.CheckpointSource(source)
	s.CustomState = rawOrNil(custom)
	s.Runtime = rawOrNil(runtime)
	s.InterruptContext = rawOrNil(ictx)
	if s.Metadata, err = decodeMetadata(metadata); err != nil {
		return nil, err
	}
	if s.Tags, err = decodeTags(tag); err != nil {
		return nil, err
	}
	s.CreatedAt = s.CreatedAt.UTC()
	s.UpdatedAt = s.UpdatedAt.UTC()
	s.CheckpointedAt = utcPtr(s.CheckpointedAt)
	s.ExpiresAt = utcPtr(s.ExpiresAt)
	return &r, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// getSession reads a session; lock takes the row lock that serialises every
// version-checked write of that session. FOR NO KEY UPDATE is the lock an
// UPDATE takes: it excludes other writers of the row but not the key-share
// locks that foreign-key checks of inserted messages and runs take.
func getSession(ctx context.Context, q querier, id string, lock bool) (*sessionRow, error) {
	sql := "SELECT " + sessionCols + " FROM sessions WHERE id = $1"
	if lock {
		sql += " FOR NO KEY UPDATE"
	}
	r, err := scanSession(q.QueryRow(ctx, sql, id))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("session %s", id), err)
	}
	return r, nil
}

// requireSession returns ErrNotFound unless the session exists. List reads
// call it only when they found nothing, to tell "none" from "no session".
func requireSession(ctx context.Context, q querier, id string) error {
	var ok bool
	if err := q.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM sessions WHERE id = $1)", id).Scan(&ok); err != nil {
		return mapErr(fmt.Sprintf("session %s", id), err)
	}
	if !ok {
		return fmt.Errorf("session %s: %w", id, store.ErrNotFound)
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

// stateArgs are a SessionState's validated query arguments.
type stateArgs struct {
	status, custom, runtime string
	ictx, metadata, tags    any
}

func validateState(st store.SessionState) (stateArgs, error) {
	var (
		a   stateArgs
		err error
	)
	if !st.Status.Valid() {
		return a, fmt.Errorf("state.Status %q is not a session status: %w", st.Status, store.ErrInvalid)
	}
	a.status = string(st.Status)
	if a.custom, err = objectArg("state.CustomState", st.CustomState); err != nil {
		return a, err
	}
	if a.runtime, err = objectArg("state.Runtime", st.Runtime); err != nil {
		return a, err
	}
	if a.ictx, err = jsonArg("state.InterruptContext", st.InterruptContext); err != nil {
		return a, err
	}
	if a.metadata, err = metadataArg(st.Metadata); err != nil {
		return a, err
	}
	if a.tags, err = tagsArg(st.Tags); err != nil {
		return a, err
	}
	return a, nil
}

// pointer is where a write moves the session's checkpoint pointer; the zero
// value leaves it alone.
type pointer struct {
	id     string
	at     *time.Time
	source string
}

// writeState overwrites the writable state, bumps the version once and
// optionally moves the checkpoint pointer, returning the new row. The caller
// holds the row lock.
func writeState(ctx context.Context, tx pgx.Tx, id string, st store.SessionState, msgCount int64, ptr pointer, now time.Time) (*sessionRow, error) {
	a, err := validateState(st)
	if err != nil {
		return nil, err
	}
	r, err := scanSession(tx.QueryRow(ctx, `UPDATE sessions SET
		status = $2, custom_state = $3, runtime = $4, step_count = $5, error = $6,
		failure_reason = $7, interrupt_context = $8, metadata = $9, tags = $10,
		expires_at = $11, message_count = $12, updated_at = $13, version = version + 1,
		checkpoint_id = CASE WHEN $14::text = '' THEN checkpoint_id ELSE $14 END,
		checkpointed_at = CASE WHEN $14::text = '' THEN checkpointed_at ELSE $15 END,
		checkpoint_source = CASE WHEN $14::text = '' THEN checkpoint_source ELSE $16 END
		WHERE id = $1 RETURNING `+sessionCols,
		id, a.status, a.custom, a.runtime, st.StepCount, st.Error,
		st.FailureReason, a.ictx, a.metadata, a.tags,
		st.ExpiresAt, msgCount, now,
		ptr.id, ptr.at, ptr.source))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("session %s: write state", id), err)
	}
	return r, nil
}
