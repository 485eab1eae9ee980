package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// oldSessionTables are the tables of Managed Agents sessions before 0016,
// as 0004 created them.
const oldSessionTables = `
CREATE TABLE managed_sessions (
    id             text COLLATE "C" PRIMARY KEY,
    tenant_id      text NOT NULL DEFAULT '',
    agent_id       text COLLATE "C" NOT NULL DEFAULT '',
    agent_version  bigint NOT NULL DEFAULT 0,
    environment_id text NOT NULL DEFAULT '',
    doc            json NOT NULL,
    sandbox_id     text NOT NULL DEFAULT '',
    usage          json,
    processed_seq  bigint NOT NULL DEFAULT 0,
    stop_reason    json,
    terminated_at  timestamptz,
    archived_at    timestamptz,
    last_seq       bigint NOT NULL DEFAULT 0,
    version        bigint NOT NULL DEFAULT 1,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL
);
CREATE TABLE session_events (
    session_id text COLLATE "C" NOT NULL REFERENCES managed_sessions (id) ON DELETE CASCADE,
    seq        bigint NOT NULL,
    id         text COLLATE "C" NOT NULL,
    type       text NOT NULL,
    data       json NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (session_id, seq),
    UNIQUE (session_id, id)
);
CREATE TABLE run_rows (
    session_id        text COLLATE "C" PRIMARY KEY REFERENCES managed_sessions (id) ON DELETE CASCADE,
    turn_seq          bigint NOT NULL DEFAULT 0,
    owner             text NOT NULL,
    lease_expires_at  timestamptz NOT NULL,
    recovering        boolean NOT NULL DEFAULT false,
    recovery_attempts bigint NOT NULL DEFAULT 0,
    last_progress_seq bigint NOT NULL DEFAULT 0,
    started_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL
);`

// TestMigrateOldSessions: sessions of the old tables move to the one
// session model with their events, their finished turns as runs, their
// run row as the running run and their resources, and the old tables go.
func TestMigrateOldSessions(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{oldSessionTables, nil},
		{`INSERT INTO managed_sessions (id, tenant_id, agent_id, agent_version, environment_id, doc, processed_seq,
			last_seq, version, usage, created_at, updated_at)
			VALUES ('sesn_a', 'tnt', 'agent_1', 2, 'env_1', '{"title":"a"}', 1, 5, 7, '{"input_tokens":3}', $1, $1),
			       ('sesn_b', 'tnt', 'agent_1', 2, 'env_1', '{}', 0, 2, 3, NULL, $1, $1)`, []any{at(0)}},
		{`INSERT INTO session_events (session_id, seq, id, type, data, created_at) VALUES
			('sesn_a', 1, 'sevt_1', 'user.message', '{"type":"user.message"}', $1),
			('sesn_a', 2, 'sevt_2', 'session.status_running', '{}', $2),
			('sesn_a', 3, 'sevt_3', 'agent.message', '{"content":[]}', $2),
			('sesn_a', 4, 'sevt_4', 'session.status_idle', '{}', $3),
			('sesn_a', 5, 'sevt_5', 'user.message', '{}', $3),
			('sesn_b', 1, 'sevt_6', 'user.message', '{}', $1),
			('sesn_b', 2, 'sevt_7', 'session.status_running', '{}', $1)`, []any{at(0), at(1), at(4)}},
		{`INSERT INTO run_rows (session_id, turn_seq, owner, lease_expires_at, started_at, updated_at)
			VALUES ('sesn_b', 1, 'node/boot_old', $1, $1, $1)`, []any{at(0)}},
		{`INSERT INTO session_resources (id, tenant_id, session_id, kind, mount_path, doc, created_at, updated_at)
			VALUES ('sesrsc_1', 'tnt', 'sesn_a', 'file', '/mnt/a', '{}', $1, $1)`, []any{at(0)}},
	} {
		if _, err := s.pool.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = s.migrateSessions(ctx, conn.Conn())
	conn.Release()
	if err != nil {
		t.Fatal(err)
	}

	a, err := s.GetManagedSession(ctx, "sesn_a")
	if err != nil {
		t.Fatal(err)
	}
	if a.Version != 7 || a.ProcessedSeq != 1 || string(a.Doc) != `{"title":"a"}` || string(a.Usage) != `{"input_tokens":3}` ||
		a.AgentID != "agent_1" || a.AgentVersion != 2 || a.EnvironmentID != "env_1" || a.ActiveSeconds != 3 {
		t.Fatalf("migrated session %+v", a)
	}
	evs, err := s.ListEvents(ctx, store.ListEventsParams{SessionID: "sesn_a"})
	if err != nil || len(evs) != 5 || evs[2].ID != "sevt_3" || evs[2].Type != "agent.message" || string(evs[2].Data) != `{"content":[]}` {
		t.Fatalf("migrated events %+v, %v", evs, err)
	}
	if last, _ := s.LastEventSeq(ctx, "sesn_a"); last != 5 {
		t.Fatalf("LastEventSeq %d, want 5", last)
	}
	next, err := s.AppendEvents(ctx, "sesn_a", []store.NewEvent{{Type: "agent.message"}})
	if err != nil || next[0].Seq != 6 {
		t.Fatalf("append after the migration: %+v, %v", next, err)
	}
	runs, err := s.ListRuns(ctx, "sesn_a")
	if err != nil || len(runs) != 1 || runs[0].Status != store.RunCompleted || runs[0].CompletedAt == nil {
		t.Fatalf("the finished turn as a run: %+v, %v", runs, err)
	}
	row, err := s.GetRunRow(ctx, "sesn_b")
	if err != nil || row.Owner != "node/boot_old" || row.TurnSeq != 1 {
		t.Fatalf("the run row: %+v, %v", row, err)
	}
	rs, err := s.ListSessionResources(ctx, "sesn_a", "", 0)
	if err != nil || len(rs) != 1 {
		t.Fatalf("resources: %+v, %v", rs, err)
	}
	var left bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('managed_sessions') IS NOT NULL`).Scan(&left); err != nil || left {
		t.Fatalf("old tables left: %v, %v", left, err)
	}
	// Deleting a migrated session deletes its resources too.
	if err := s.DeleteManagedSession(ctx, "sesn_a"); err != nil {
		t.Fatal(err)
	}
	if rs, _ := s.ListSessionResources(ctx, "sesn_a", "", 0); len(rs) != 0 {
		t.Fatalf("resources of a deleted session: %+v", rs)
	}
}
