package sqlite

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Column lists the managed scanners read, in order.
const (
	agentCols       = `id, tenant_id, version, doc, archived_at, created_at, updated_at`
	environmentCols = `id, tenant_id, doc, archived_at, created_at, updated_at`
	// mSessionCols read a Managed Agents session from sessions s, with the
	// start of its running turn (if any) from the live run r.
	mSessionCols = `s.id, s.tenant_id, s.agent_id, s.agent_version, s.environment_id, s.doc, s.sandbox_id,
	s.usage, s.processed_seq, s.stop_reason, s.terminated_at, s.archived_at, s.forked_from, s.forked_at_seq,
	s.branch_of, s.branch_at_seq, s.workspace_seed, s.branched_at, s.rewinds, s.interrupt_set, s.active_us, r.created_at,
	s.thread_of, s.version, s.created_at, s.updated_at`
	mSessionFrom = ` FROM sessions s LEFT JOIN runs r
	ON r.session_id = s.id AND r.status = 'running' AND r.owner <> ''`
	// eventCols read an event from its message row.
	eventCols  = `session_id, seq, event_id, role, content, created_at`
	runRowCols = `session_id, id, turn_seq, owner, lease_expires_at, recovering, recovery_attempts,
	last_progress_seq, created_at, updated_at`
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

// scanManagedSession reads mSessionCols. now is the store's clock: a
// running turn counts toward ActiveSeconds up to it.
func scanManagedSession(r scanner, now time.Time) (*store.ManagedSession, error) {
	var (
		m                              store.ManagedSession
		doc                            string
		usage, stopReason              sql.NullString
		terminated, archived, branched sql.NullInt64
		running                        sql.NullInt64
		activeUS, created, updated     int64
	)
	l := &m.Lineage
	if err := r.Scan(&m.ID, &m.TenantID, &m.AgentID, &m.AgentVersion, &m.EnvironmentID, &doc, &m.SandboxID,
		&usage, &m.ProcessedSeq, &stopReason, &terminated, &archived, &l.ForkedFrom, &l.ForkedAtSeq,
		&l.BranchOf, &l.BranchAtSeq, &l.WorkspaceSeed, &branched, &l.Rewinds, &m.InterruptPending, &activeUS, &running,
		&m.ThreadOf, &m.Version, &created, &updated); err != nil {
		return nil, err
	}
	m.Doc = []byte(doc)
	m.Usage, m.StopReason = rawOrNil(usage), rawOrNil(stopReason)
	m.TerminatedAt, m.ArchivedAt, l.BranchedAt = timePtr(terminated), timePtr(archived), timePtr(branched)
	if running.Valid && micros(now) > running.Int64 {
		activeUS += micros(now) - running.Int64
	}
	m.ActiveSeconds = float64(activeUS) / 1e6
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
	if err := r.Scan(&rr.SessionID, &rr.RunID, &rr.TurnSeq, &rr.Owner, &lease, &rr.Recovering, &rr.RecoveryAttempts,
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
	return resourcePageOf("id", p, first)
}

// resourcePageOf is resourcePage over the id column col (e.g. "s.id" in a
// join).
func resourcePageOf(col string, p store.ListResourcesParams, first int) (where, tail string, args []any) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	dir := "ASC"
	if p.Descending {
		dir = "DESC"
	}
	where = fmt.Sprintf(` AND (?%[1]d = '' OR %[3]s > ?%[1]d) AND (?%[2]d = '' OR %[3]s < ?%[2]d)`, first, first+1, col)
	tail = fmt.Sprintf(` ORDER BY %s %s LIMIT ?%d`, col, dir, first+2)
	return where, tail, []any{p.AfterID, p.BeforeID, limit}
}
