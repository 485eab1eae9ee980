package object

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Tenants ship an object class's code as a bundle: a tar (plain, gzip or
// zstd) of the app, uploaded for a class they defined through the API and
// mounted read-only at /app of the class's object sandboxes. A new upload
// replaces the bundle for every wake from then on; objects running at
// that moment keep the files they started with until they hibernate (or
// are deleted), then wake on the new bundle.

var errNoBundles = fmt.Errorf("%w: object bundles need a blob store and a bundle directory (set by the daemon)", ErrNoBundle)

// PutBundle stores body as the bundle of one of the tenant's classes. The
// archive is checked and unpacked before it replaces anything: a refused
// one (*BundleError, *LimitError) leaves the class as it was.
func (r *Runtime) PutBundle(ctx context.Context, tenantID, class string, body io.Reader) (*BundleInfo, error) {
	if err := r.bundleClass(ctx, tenantID, class); err != nil {
		return nil, err
	}
	in, err := r.bundles.put(ctx, tenantID, class, body)
	if err != nil {
		return nil, err
	}
	r.log.InfoContext(ctx, "object bundle uploaded", "tenant", tenantID, "class", class, "sha256", in.SHA256, "bytes", in.Size)
	return in, nil
}

// Bundle describes a class's bundle (ErrNoBundle when it has none).
func (r *Runtime) Bundle(ctx context.Context, tenantID, class string) (*BundleInfo, error) {
	if err := r.bundleClass(ctx, tenantID, class); err != nil {
		return nil, err
	}
	in, err := r.bundles.info(ctx, tenantID, class)
	if err != nil {
		return nil, err
	}
	if in == nil {
		return nil, fmt.Errorf("%w for class %q: upload one with PUT /v1/objects/definitions/%s/bundle", ErrNoBundle, class, class)
	}
	return in, nil
}

// DeleteBundle removes a class's bundle; later wakes have no /app.
func (r *Runtime) DeleteBundle(ctx context.Context, tenantID, class string) error {
	if err := r.bundleClass(ctx, tenantID, class); err != nil {
		return err
	}
	removed, err := r.bundles.remove(ctx, tenantID, class)
	if err != nil {
		return err
	}
	if !removed {
		return fmt.Errorf("%w for class %q", ErrNoBundle, class)
	}
	return nil
}

// bundleClass checks that class is one of the tenant's API classes.
func (r *Runtime) bundleClass(ctx context.Context, tenantID, class string) error {
	if r.bundles == nil {
		return errNoBundles
	}
	if _, ok := r.configClasses[class]; ok {
		return fmt.Errorf("%w: class %q is declared in agentkernel.toml; its code comes from its app_dir or image there", ErrClassConflict, class)
	}
	if _, err := r.Class(ctx, tenantID, class); err != nil {
		if errors.Is(err, ErrUnknownClass) {
			return fmt.Errorf("%w %q: define it first (POST /v1/objects/definitions), then upload its bundle", ErrUnknownClass, class)
		}
		return err
	}
	return nil
}

// MaxBundleBytes is durable_objects.max_bundle_bytes.
func (r *Runtime) MaxBundleBytes() int64 { return r.lim.MaxBundleBytes }
