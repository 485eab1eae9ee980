package object

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Bundles uploaded before they had rows are blobs under bundles/TENANT/CLASS
// that no row holds: the blob GC would delete them at its first pass.
// AdoptLegacyBundles gives each the form a new upload has (its
// content-addressed key and its class's row) and must run before that pass.

// AdoptLegacyBundles adopts the bundles an earlier version stored without a
// row. The daemon runs it at start, before the blob GC starts. A blob that
// fails verification, or whose class is gone, is left to the GC (nothing
// could mount it); any other failure is returned, so the daemon does not
// start a GC that would delete what could not be adopted.
func (r *Runtime) AdoptLegacyBundles(ctx context.Context) error {
	if r.bundles == nil {
		return nil
	}
	return r.bundles.adoptLegacy(ctx)
}

type legacyBundle struct {
	tenant, class string
	blob          blob.Info
}

func (b *bundleStore) adoptLegacy(ctx context.Context) error {
	var found []legacyBundle
	for in, err := range b.blobs.List(ctx, bundlePrefix) {
		if err != nil {
			b.log.WarnContext(ctx, "object bundles: list blobs for bundles stored without a row", "err", err)
			continue
		}
		// bundles/TENANT/CLASS; current keys are bundles/TENANT/sha256/HEX.
		tenant, class, ok := strings.Cut(strings.TrimPrefix(in.Key, bundlePrefix), "/")
		if !ok || strings.Contains(class, "/") {
			continue
		}
		found = append(found, legacyBundle{tenant: tenant, class: class, blob: in})
	}
	var errs []error
	for _, l := range found {
		if err := b.adopt(ctx, l); err != nil {
			errs = append(errs, fmt.Errorf("adopt the bundle of class %q of tenant %s (blob %s): %w", l.class, l.tenant, l.blob.Key, err))
		}
	}
	return errors.Join(errs...)
}

func (b *bundleStore) adopt(ctx context.Context, l legacyBundle) error {
	log := b.log.With("tenant", l.tenant, "class", l.class, "blob", l.blob.Key)
	if !tenantRE.MatchString(l.tenant) {
		log.WarnContext(ctx, "object bundles: a blob under bundles/ names no tenant; left to the blob GC")
		return nil
	}
	_, err := b.st.GetObjectBundle(ctx, l.tenant, l.class)
	switch {
	case err == nil:
		// Adopted already (a crash came before the old key was deleted),
		// or uploaded again since: the row is what counts.
		return b.blobs.Delete(ctx, l.blob.Key)
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	if _, err := b.st.GetObjectClass(ctx, l.tenant, l.class); errors.Is(err, store.ErrNotFound) {
		log.InfoContext(ctx, "object bundles: the class of a bundle stored without a row is gone; left to the blob GC")
		return nil
	} else if err != nil {
		return err
	}
	rc, _, err := b.blobs.Get(ctx, l.blob.Key)
	if err != nil {
		return err
	}
	defer rc.Close()
	// Put reads the old blob to its end, where Get verifies length and
	// sha256: a corrupt one is never recorded.
	row, err := b.record(ctx, l.tenant, l.class, l.blob.SHA256, l.blob.ModTime,
		func(key string) (blob.Info, error) { return b.blobs.Put(ctx, key, rc) })
	switch {
	case errors.Is(err, blob.ErrCorrupt):
		log.ErrorContext(ctx, "object bundles: a bundle stored without a row is corrupt; left to the blob GC, upload it again", "err", err)
		return nil
	case err != nil:
		return err
	}
	if err := b.blobs.Delete(ctx, l.blob.Key); err != nil {
		// Held by no row: the GC deletes it.
		log.WarnContext(ctx, "object bundles: delete the old key of an adopted bundle", "err", err)
	}
	log.InfoContext(ctx, "object bundle adopted under its content-addressed key", "key", row.BlobKey, "sha256", row.SHA256)
	return nil
}
