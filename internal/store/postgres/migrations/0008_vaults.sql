-- Vaults of the Managed Agents API and their credentials. A credential's
-- doc holds only what may be shown (kind, display name, metadata, the auth
-- fields that are not secret); the secret fields are sealed by the daemon
-- (AES-256-GCM, bound to tenant and credential id) into secret, under the
-- key key_id names, so the database never holds one in clear. version
-- counts writes, so a token refresh and a key rotation never lose each
-- other's write. Ids are COLLATE "C" as in 0004.

CREATE TABLE vaults (
    id          text COLLATE "C" PRIMARY KEY,
    tenant_id   text NOT NULL DEFAULT '',
    doc         json NOT NULL,
    archived_at timestamptz,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX vaults_tenant_id_idx ON vaults (tenant_id, id);

CREATE TABLE vault_credentials (
    id          text COLLATE "C" PRIMARY KEY,
    tenant_id   text NOT NULL DEFAULT '',
    vault_id    text COLLATE "C" NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
    kind        text NOT NULL,
    doc         json NOT NULL,
    secret      bytea NOT NULL,
    key_id      text COLLATE "C" NOT NULL,
    version     bigint NOT NULL DEFAULT 1,
    archived_at timestamptz,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX vault_credentials_vault_idx ON vault_credentials (vault_id, id);
CREATE INDEX vault_credentials_key_idx ON vault_credentials (key_id, id);
