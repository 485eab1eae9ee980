-- Vaults of the Managed Agents API and their credentials. A credential's
-- doc holds only what may be shown (kind, display name, metadata, the auth
-- fields that are not secret); the secret fields are sealed by the daemon
-- (AES-256-GCM, bound to tenant and credential id) into secret, under the
-- key key_id names, so the database never holds one in clear. version
-- counts writes, so a token refresh and a key rotation never lose each
-- other's write. Times are unix microseconds as in 0001.

CREATE TABLE vaults (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL DEFAULT '',
    doc         TEXT NOT NULL,
    archived_at INTEGER,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX vaults_tenant ON vaults (tenant_id, id);

CREATE TABLE vault_credentials (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL DEFAULT '',
    vault_id    TEXT NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    doc         TEXT NOT NULL,
    secret      BLOB NOT NULL,
    key_id      TEXT NOT NULL,
    version     INTEGER NOT NULL DEFAULT 1,
    archived_at INTEGER,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX vault_credentials_vault ON vault_credentials (vault_id, id);
-- A rotation asks which rows another key sealed.
CREATE INDEX vault_credentials_key ON vault_credentials (key_id, id);
