-- Tenants' object bundles: the archive a tenant uploads as the code of one
-- of its API classes is a blob under a content-addressed key
-- (bundles/TENANT/sha256/HEX), and this row is what holds it: the blob GC
-- deletes every blob no column of store.BlobKeyColumns holds. Deleting the
-- class deletes its row (the GC then collects the blob unless another class
-- of the tenant uploaded the same bytes). Times are unix microseconds as in
-- 0001.

CREATE TABLE object_bundles (
    tenant_id   TEXT NOT NULL,
    class       TEXT NOT NULL,
    blob_key    TEXT NOT NULL,
    sha256      TEXT NOT NULL,
    size        INTEGER NOT NULL,
    uploaded_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, class),
    FOREIGN KEY (tenant_id, class) REFERENCES object_classes (tenant_id, class) ON DELETE CASCADE
) WITHOUT ROWID;
-- The blob GC asks which keys rows hold.
CREATE INDEX object_bundles_blob_key ON object_bundles (blob_key);
