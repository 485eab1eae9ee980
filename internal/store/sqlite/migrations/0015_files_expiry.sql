-- The files reaper (internal/files) finds expired files across tenants by
-- expires_at; most files never expire, so only those that do are indexed.

CREATE INDEX files_expiry ON files (expires_at, id) WHERE expires_at IS NOT NULL;
