package postgres

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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

func scanAgent(row pgx.Row) (*store.Agent, error) {
	var (
		a   store.Agent
		doc []byte
	)
	if err := row.Scan(&a.ID, &a.TenantID, &a.Version, &doc, &a.ArchivedAt, &a.CreatedAt, &a.UpdatedAt); err != nil {
		return nil, err
	}
	a.Doc = rawOrNil(doc)
	a.ArchivedAt = utcPtr(a.ArchivedAt)
	a.CreatedAt, a.UpdatedAt = a.CreatedAt.UTC(), a.UpdatedAt.UTC()
	return &a, nil
}

func scanEnvironment(row pgx.Row) (*store.Environment, error) {
	var (
		e   store.Environment
		doc []byte
	)
	if err := row.Scan(&e.ID, &e.TenantID, &doc, &e.ArchivedAt, &e.CreatedAt, &e.UpdatedAt); err != nil {
		return nil, err
	}
	e.Doc = rawOrNil(doc)
	e.ArchivedAt = utcPtr(e.ArchivedAt)
	e.CreatedAt, e.UpdatedAt = e.CreatedAt.UTC(), e.UpdatedAt.UTC()
	return &e, nil
}

// scanManagedSession reads mSessionCols. now is the store's clock: a
// running turn counts toward ActiveSeconds up to it.
func scanManagedSession(row pgx.Row, now time.Time) (*store.ManagedSession, error) {
	var (
		m                      store.ManagedSession
		doc, usage, stopReason []byte
		activeUS               int64
		running                *time.Time
	)
	l := &m.Lineage
	if err := row.Scan(&m.ID, &m.TenantID, &m.AgentID, &m.AgentVersion, &m.EnvironmentID, &doc, &m.SandboxID,
		&usage, &m.ProcessedSeq, &stopReason, &m.TerminatedAt, &m.ArchivedAt, &l.ForkedFrom, &l.ForkedAtSeq,
		&l.BranchOf, &l.BranchAtSeq, &l.WorkspaceSeed, &l.BranchedAt, &l.Rewinds, &m.InterruptPending, &activeUS, &running,
		&m.ThreadOf, &m.Version, &m.CreatedAt, &m.UpdatedAt); err != nil {
		return nil, err
	}
	m.Doc, m.Usage, m.StopReason = rawOrNil(doc), rawOrNil(usage), rawOrNil(stopReason)
	m.TerminatedAt, m.ArchivedAt, l.BranchedAt = utcPtr(m.TerminatedAt), utcPtr(m.ArchivedAt), utcPtr(l.BranchedAt)
	if running != nil && now.After(*running) {
		activeUS += now.Sub(*running).Microseconds()
	}
	m.ActiveSeconds = float64(activeUS) / 1e6
	m.CreatedAt, m.UpdatedAt = m.CreatedAt.UTC(), m.UpdatedAt.UTC()
	return &m, nil
}

func scanEvent(row pgx.Row) (store.SessionEvent, error) {
	var (
		ev   store.SessionEvent
		data []byte
	)
	if err := row.Scan(&ev.SessionID, &ev.Seq, &ev.ID, &ev.Type, &data, &ev.CreatedAt); err != nil {
		return ev, err
	}
	ev.Data = rawOrNil(data)
	ev.CreatedAt = ev.CreatedAt.UTC()
	return ev, nil
}

func scanRunRow(row pgx.Row) (*store.RunRow, error) {
	var r store.RunRow
	var lease *time.Time
	if err := row.Scan(&r.SessionID, &r.RunID, &r.TurnSeq, &r.Owner, &lease, &r.Recovering, &r.RecoveryAttempts,
		&r.LastProgressSeq, &r.StartedAt, &r.UpdatedAt); err != nil {
		return nil, err
	}
	if lease != nil {
		r.LeaseExpiresAt = lease.UTC()
	}
	r.StartedAt, r.UpdatedAt = r.StartedAt.UTC(), r.UpdatedAt.UTC()
	return &r, nil
}

// collect scans every row with scan; an empty result is an empty slice.
func collect[T any](rows pgx.Rows, what string, scan func(pgx.Row) (T, error)) ([]T, error) {
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) { return scan(row) })
	if err != nil {
		return nil, mapErr("list "+what, err)
	}
	if out == nil {
		out = []T{}
	}
	return out, nil
}

// resourcePage renders what every resource listing shares: the exclusive
// id window, the direction and the limit. first is the number of the first
// of its three $N parameters (the caller's own come before); it returns the
// WHERE fragment, the ORDER BY … LIMIT tail and their arguments.
func resourcePage(p store.ListResourcesParams, first int) (where, tail string, args []any) {
	return resourcePageOf("id", p, first)
}

// resourcePageOf is resourcePage over the id expression col (e.g.
// `s.id COLLATE "C"` for sessions, whose id column has the database's
// collation).
func resourcePageOf(col string, p store.ListResourcesParams, first int) (where, tail string, args []any) {
	var limit *int
	if p.Limit > 0 {
		limit = &p.Limit
	}
	dir := "ASC"
	if p.Descending {
		dir = "DESC"
	}
	where = fmt.Sprintf(` AND ($%[1]d::text = '' OR %[3]s > $%[1]d) AND ($%[2]d::text = '' OR %[3]s < $%[2]d)`, first, first+1, col)
	tail = fmt.Sprintf(` ORDER BY %s %s LIMIT $%d`, col, dir, first+2)
	return where, tail, []any{p.AfterID, p.BeforeID, limit}
}
