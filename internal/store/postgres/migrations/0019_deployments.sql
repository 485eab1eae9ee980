-- Scheduled deployments (issue 14): a deployment is a stored session
-- recipe with an optional cron schedule. next_fire_at is the durable alarm
-- of its schedule: the scheduler claims a due fire by advancing it and
-- inserting the run in one transaction (version guards updates against a
-- concurrent claim).
CREATE TABLE deployments (
    id            text COLLATE "C" PRIMARY KEY,
    tenant_id     text NOT NULL,
    agent_id      text NOT NULL,
    doc           json NOT NULL,
    paused_reason json,
    next_fire_at  timestamptz,
    last_run_at   timestamptz,
    archived_at   timestamptz,
    version       bigint NOT NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);
CREATE INDEX deployments_tenant ON deployments (tenant_id, id);
CREATE INDEX deployments_due ON deployments (next_fire_at) WHERE next_fire_at IS NOT NULL;

-- A run is claimed first (session_id '' and error NULL) and started after:
-- its session id is derived from the run id, so a start repeated after a
-- crash finds the session it made instead of making a second one.
CREATE TABLE deployment_runs (
    id            text COLLATE "C" PRIMARY KEY,
    tenant_id     text NOT NULL,
    deployment_id text NOT NULL,
    agent         json NOT NULL,
    trigger_type  text NOT NULL,
    scheduled_at  timestamptz,
    session_id    text NOT NULL DEFAULT '',
    error         json,
    created_at    timestamptz NOT NULL
);
CREATE INDEX deployment_runs_tenant ON deployment_runs (tenant_id, id);
CREATE INDEX deployment_runs_unstarted ON deployment_runs (id) WHERE session_id = '' AND error IS NULL;
