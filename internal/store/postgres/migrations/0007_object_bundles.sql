-- Tenants' object bundles: the archive a tenant uploads as the code of one
-- of its API classes is a blob under a content-addressed key
-- (bundles/TENANT/sha256/HEX), and this row is what holds it: the blob GC
-- deletes every blob no column of store.BlobKeyColumns holds. Deleting the
-- class deletes its row (the GC then collects the blob unless another class
-- of the tenant uploaded the same bytes).

CREATE TABLE object_bundles (
    tenant_id   text NOT NULL,
    class       text NOT NULL,
    blob_key    text NOT NULL,
    sha256      text NOT NULL,
    size        bigint NOT NULL,
    uploaded_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, class),
    FOREIGN KEY (tenant_id, class) REFERENCES object_classes (tenant_id, class) ON DELETE CASCADE
);
-- The blob GC asks which keys rows hold.
CREATE INDEX object_bundles_blob_key_idx ON object_bundles (blob_key);
