package sqlite

import (
	"database/sql"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Column lists the managed scanners read, in order.
const (
	agentCols       = `id, tenant_id, version, doc, archived_at, created_at, updated_at`
	environmentCols = `id, tenant_id, doc, archived_at, created_at, updated_at`
	mSessionCols    = `id, tenant_id, agent_id, agent_version, environment_id, doc, sandbox_id, usage,
	processed_seq, stop_reason, terminated_at, archived_at, version, created_at, updated_at`
	eventCols  = `session_id, seq, id, type, data, created_at`
	runRowCols = `session_id, turn_seq, owner, lease_expires_at, recovering, recovery_attempts,
	last_progress_seq, started_at, updated_at`
)

func scanAgent(r scanner) (*store.Agent, error) {
	var (
		a                store.Agent
		doc              string
		archived         sql.NullInt64
		created, updated int64
	)
	if err := r.Scan(&a.ID, &a.TenantID, &a.Version, &doc, &archived, &created, &updated); err != nil {
		return nil, err
	}
	a.Doc = []byte(doc)
	a.ArchivedAt = timePtr(archived)
	a.CreatedAt, a.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &a, nil
}

func scanEnvironment(r scanner) (*store.Environment, error) {
	var (
		e                store.Environment
		doc              string
		archived         sql.NullInt64
		created, updated int64
	)
	if err := r.Scan(&e.ID, &e.TenantID, &doc, &archived, &created, &updated); err != nil {
		return nil, err
	}
	e.Doc = []byte(doc)
	e.ArchivedAt = timePtr(archived)
	e.CreatedAt, e.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &e, nil
}

func scanManagedSession(r scanner) (*store.ManagedSession, error) {
	var (
		m                    store.ManagedSession
		doc                  string
		usage, stopReason    sql.NullString
		terminated, archived sql.NullInt64
		created, updated     int64
	)
	if err := r.Scan(&m.ID, &m.TenantID, &m.AgentID, &m.AgentVersion, &m.EnvironmentID, &doc, &m.SandboxID,
		&usage, &m.ProcessedSeq, &stopReason, &terminated, &archived, &m.Version, &created, &updated); err != nil {
		return nil, err
	}
	m.Doc = []byte(doc)
	m.Usage, m.StopReason = rawOrNil(usage), rawOrNil(stopReason)
	m.TerminatedAt, m.ArchivedAt = timePtr(terminated), timePtr(archived)
	m.CreatedAt, m.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &m, nil
}

func scanEvent(r scanner) (store.SessionEvent, error) {
	var (
		ev      store.SessionEvent
		data    string
		created int64
	)
	if err := r.Scan(&ev.SessionID, &ev.Seq, &ev.ID, &ev.Type, &data, &created); err != nil {
		return ev, err
	}
	ev.Data = []byte(data)
	ev.CreatedAt = fromMicros(created)
	return ev, nil
}

func scanRunRow(r scanner) (*store.RunRow, error) {
	var (
		rr                      store.RunRow
		lease, started, updated int64
	)
	if err := r.Scan(&rr.SessionID, &rr.TurnSeq, &rr.Owner, &lease, &rr.Recovering, &rr.RecoveryAttempts,
		&rr.LastProgressSeq, &started, &updated); err != nil {
		return nil, err
	}
	rr.LeaseExpiresAt = fromMicros(lease)
	rr.StartedAt, rr.UpdatedAt = fromMicros(started), fromMicros(updated)
	return &rr, nil
}

// collect scans every row with scan; an empty result is an empty slice.
func collect[T any](rows *sql.Rows, what string, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: scan %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list %s: %w", what, err)
	}
	return out, nil
}

// resourcePage renders what every resource listing shares: the exclusive
// id window, the direction and the limit. first is the number of the first
// of its three ?N parameters (the caller's own come before); it returns the
// WHERE fragment, the ORDER BY … LIMIT tail and their arguments.
func resourcePage(p store.ListResourcesParams, first int) (where, tail string, args []any) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	dir := "ASC"
	if p.Descending {
		dir = "DESC"
	}
	where = fmt.Sprintf(` AND (?%[1]d = '' OR id > ?%[1]d) AND (?%[2]d = '' OR id < ?%[2]d)`, first, first+1)
	tail = fmt.Sprintf(` ORDER BY id %s LIMIT ?%d`, dir, first+2)
	return where, tail, []any{p.AfterID, p.BeforeID, limit}
}
