package store

import "context"

// BlobRefStore tells the blob garbage collector which blobs rows still
// point at. The collector deletes a blob only when no column listed in
// BlobKeyColumns holds its key.
type BlobRefStore interface {
	// ReferencedBlobKeys returns the subset of keys that some row holds in
	// a column of BlobKeyColumns. Empty keys are never referenced.
	ReferencedBlobKeys(ctx context.Context, keys []string) (map[string]bool, error)
}

// BlobKeyColumn is a table column that holds blob keys.
type BlobKeyColumn struct {
	Table  string
	Column string
}

// BlobKeyColumns lists every column, in both engines' schemas, that holds
// a blob key. A new kind of row that points at a blob adds its column here
// in the same change that creates it: the blob GC deletes, after its grace
// period, every blob that none of these columns holds. Each engine's tests
// fail on a column named like *blob_key* that is missing from this list.
var BlobKeyColumns = []BlobKeyColumn{
	{Table: "backups", Column: "blob_key"},
	{Table: "files", Column: "blob_key"},
	{Table: "object_bundles", Column: "blob_key"},
	{Table: "skill_versions", Column: "blob_key"},
	{Table: "transcripts", Column: "blob_key"},
}

// BlobRefBatch is how many keys one ReferencedBlobKeys query checks; the
// engines split longer lists.
const BlobRefBatch = 500
